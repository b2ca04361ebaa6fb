//! `plan --live`: the TidalSchedulers and calendars the controller would see, listed from
//! the cluster of the kubeconfig.

use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::error::CliError;
use super::manifests::Manifests;
use super::process::runtime;
use crate::api::{ClusterTidalCalendar, TidalCalendar, TidalScheduler};

/// Lists the objects of `namespace` (default: the context's), or of every namespace, with
/// the calendars they can refer to.
pub fn read(
    context: Option<&str>,
    namespace: Option<&str>,
    all_namespaces: bool,
) -> Result<Manifests, CliError> {
    runtime()?.block_on(async {
        let client = client(context).await?;
        let namespace =
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned);
        let (objects, calendars): (Api<TidalScheduler>, Api<TidalCalendar>) = if all_namespaces {
            (Api::all(client.clone()), Api::all(client.clone()))
        } else {
            (
                Api::namespaced(client.clone(), &namespace),
                Api::namespaced(client.clone(), &namespace),
            )
        };
        let scope = if all_namespaces {
            "all namespaces".to_owned()
        } else {
            format!("namespace {namespace}")
        };
        let mut manifests = Manifests::default();
        let source = format!("cluster ({scope})");
        for object in list(&objects, "TidalSchedulers", &scope).await? {
            manifests.objects.push((source.clone(), object));
        }
        for calendar in list(&calendars, "TidalCalendars", &scope).await? {
            manifests.calendars.add_namespaced(calendar);
        }
        let cluster: Api<ClusterTidalCalendar> = Api::all(client);
        for calendar in list(&cluster, "ClusterTidalCalendars", "the cluster").await? {
            manifests.calendars.add_cluster(calendar);
        }
        Ok(manifests)
    })
}

/// A client for `context` of the kubeconfig (the current one if `None`), or the in-cluster
/// configuration when there is no kubeconfig.
async fn client(context: Option<&str>) -> Result<Client, CliError> {
    let failed = |e: &dyn std::fmt::Display| {
        CliError::Runtime(format!("no usable Kubernetes configuration: {e}"))
    };
    let config = match context {
        Some(context) => {
            let options = KubeConfigOptions {
                context: Some(context.to_owned()),
                ..KubeConfigOptions::default()
            };
            let kubeconfig = Kubeconfig::read().map_err(|e| failed(&e))?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| failed(&e))?
        }
        None => Config::infer().await.map_err(|e| failed(&e))?,
    };
    Client::try_from(config).map_err(|e| failed(&e))
}

/// Every object of `api`, or an error naming what could not be listed where.
async fn list<K>(api: &Api<K>, what: &str, scope: &str) -> Result<Vec<K>, CliError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|e| CliError::Runtime(format!("failed to list {what} in {scope}: {e}")))?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}
