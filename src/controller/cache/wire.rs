//! Watched objects read off the wire without what the caches drop: the values of
//! `metadata.managedFields` and `metadata.annotations` are parsed past, never built.
//!
//! Every watched object is deserialized each time it changes — after each of our own status
//! and target writes too — and the caches then drop those two fields ([`super::scope::slim`]).
//! Building them first cost CPU on every trigger (managedFields is a JSON tree per field
//! manager) and, in a cold start's initial list, memory that was freed at once.
//! `Api<Slim<K>>` sends the same requests as `Api<K>` and yields `K`s without them.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Metadata fields never built: no cache keeps them.
const DROPPED: [&str; 2] = ["managedFields", "annotations"];

/// A `K` deserialized without its metadata's [`DROPPED`] fields.
#[derive(Clone, Debug)]
pub struct Slim<K>(pub K);

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Slim<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Filtered::new(deserializer, Level::Object)).map(Slim)
    }
}

impl<K: Resource> Resource for Slim<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn metadata_api() -> bool {
        K::metadata_api()
    }

    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// Where in the object a map is.
#[derive(Clone, Copy)]
enum Level {
    /// The object: its `metadata` is read at [`Level::Metadata`].
    Object,
    /// The object's metadata: its [`DROPPED`] fields are skipped.
    Metadata,
}

/// Deserializer methods that read `inner` as it is.
macro_rules! pass_on {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(visitor)
        }
    )*};
}

/// A deserializer whose maps pass through [`FilteredMap`]; anything else is untouched.
struct Filtered<D> {
    inner: D,
    level: Level,
}

impl<D> Filtered<D> {
    fn new(inner: D, level: Level) -> Self {
        Filtered { inner, level }
    }

    fn visitor<V>(&self, inner: V) -> FilteredVisitor<V> {
        FilteredVisitor {
            inner,
            level: self.level,
        }
    }
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filtered<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_map(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_option(visitor)
    }

    // Objects and their metadata are maps: anything else is read as it would be without.
    pass_on! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_bytes deserialize_byte_buf deserialize_unit
        deserialize_seq deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor that reads maps through [`FilteredMap`] and passes anything else on.
struct FilteredVisitor<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilteredVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(FilteredMap {
            map,
            level: self.level,
            metadata_next: false,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.inner.visit_bool(v)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.inner.visit_i64(v)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.inner.visit_u64(v)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.inner.visit_f64(v)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<V::Value, E> {
        self.inner.visit_string(v)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner
            .visit_some(Filtered::new(deserializer, self.level))
    }
}

/// A map read at `level`: an object's `metadata` value is read at [`Level::Metadata`],
/// whose [`DROPPED`] entries are skipped.
struct FilteredMap<A> {
    map: A,
    level: Level,
    /// Whether the value to read next is the object's `metadata`.
    metadata_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilteredMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<Key<'de>>()? {
            match self.level {
                Level::Metadata if DROPPED.contains(&key.as_str()) => {
                    self.map.next_value::<IgnoredAny>()?;
                }
                Level::Metadata => return key.read_by(seed).map(Some),
                Level::Object => {
                    self.metadata_next = key.as_str() == "metadata";
                    return key.read_by(seed).map(Some);
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.map.next_value_seed(MetadataSeed(seed))
        } else {
            self.map.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// The seed of an object's `metadata`, reading it at [`Level::Metadata`].
struct MetadataSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0
            .deserialize(Filtered::new(deserializer, Level::Metadata))
    }
}

/// A map key, borrowed from the input unless it had to be unescaped.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }
}

impl<'de> Key<'de> {
    /// What `seed` makes of this key, as if it had read it from the input.
    fn read_by<S: DeserializeSeed<'de>, E: serde::de::Error>(self, seed: S) -> Result<S::Value, E> {
        match self {
            Key::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
            Key::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a field name")
            }

            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(key))
            }

            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key.to_owned()))
            }

            fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{DynamicObject, ObjectList};
    use kube::core::{PartialObjectMeta, WatchEvent};
    use serde_json::json;

    use super::*;
    use crate::api::TidalScheduler;

    fn metadata() -> serde_json::Value {
        json!({
            "name": "shop",
            "namespace": "default",
            "uid": "4d3c9a0e-0000-4000-8000-000000000001",
            "resourceVersion": "42",
            "labels": { "app": "shop" },
            "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" },
            "managedFields": [{
                "manager": "tidal-scheduler",
                "operation": "Update",
                "subresource": "status",
                "fieldsType": "FieldsV1",
                "fieldsV1": { "f:status": { "f:desiredReplicas": {} } }
            }]
        })
    }

    fn scheduler() -> serde_json::Value {
        json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalScheduler",
            "metadata": metadata(),
            "spec": {
                "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "shop" },
                "triggers": { "times": { "rules": [
                    { "name": "day", "cron": "0 0 9 * * *", "replicas": 5 }
                ] } }
            },
            "status": { "desiredReplicas": 5, "activeRule": "day" }
        })
    }

    /// `object` read plainly, without the fields a slim read never builds.
    fn without_dropped<K: Resource>(mut object: K) -> K {
        object.meta_mut().managed_fields = None;
        object.meta_mut().annotations = None;
        object
    }

    #[test]
    fn a_slim_read_is_the_plain_read_without_managed_fields_and_annotations() {
        let text = scheduler().to_string();
        let plain: TidalScheduler = serde_json::from_str(&text).unwrap();
        assert!(plain.metadata.managed_fields.is_some() && plain.metadata.annotations.is_some());

        let Slim(slim) = serde_json::from_str::<Slim<TidalScheduler>>(&text).unwrap();

        let plain = without_dropped(plain);
        assert_eq!(slim.metadata, plain.metadata);
        assert_eq!((slim.spec, slim.status), (plain.spec, plain.status));
        assert_eq!(slim.metadata.labels.unwrap()["app"], "shop");
    }

    #[test]
    fn watch_events_lists_metadata_only_and_dynamic_objects_read_slim() {
        let event = json!({ "type": "MODIFIED", "object": scheduler() }).to_string();
        let Ok(WatchEvent::Modified(Slim(object))) =
            serde_json::from_str::<WatchEvent<Slim<TidalScheduler>>>(&event)
        else {
            panic!("not a MODIFIED event: {event}");
        };
        assert!(object.metadata.managed_fields.is_none() && object.metadata.annotations.is_none());
        assert_eq!(object.status.unwrap().desired_replicas, Some(5));

        let list = json!({ "metadata": { "resourceVersion": "43" }, "items": [scheduler()] });
        let list: ObjectList<Slim<TidalScheduler>> = serde_json::from_value(list).unwrap();
        assert!(list.items[0].0.metadata.managed_fields.is_none());

        let partial = json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": metadata()
        });
        let Slim(partial) =
            serde_json::from_value::<Slim<PartialObjectMeta<Deployment>>>(partial).unwrap();
        assert_eq!(partial.metadata.resource_version.as_deref(), Some("42"));
        assert!(partial.metadata.managed_fields.is_none());

        // A flattened struct, read as a map.
        let Slim(dynamic) = serde_json::from_value::<Slim<DynamicObject>>(scheduler()).unwrap();
        assert!(
            dynamic.metadata.managed_fields.is_none() && dynamic.metadata.annotations.is_none()
        );
        assert_eq!(dynamic.data["spec"]["targetRef"]["name"], "shop");
    }

    #[test]
    fn a_slim_kind_is_requested_as_the_kind_itself() {
        // Metadata-only requests stay metadata-only.
        assert!(Slim::<PartialObjectMeta<Deployment>>::metadata_api());
        assert!(!Slim::<TidalScheduler>::metadata_api());
        assert_eq!(
            Slim::<TidalScheduler>::url_path(&(), Some("shop")),
            TidalScheduler::url_path(&(), Some("shop"))
        );
        assert_eq!(Slim::<Deployment>::api_version(&()), "apps/v1");
    }

    #[test]
    fn only_the_objects_own_metadata_is_filtered() {
        // A `metadata` or `annotations` key elsewhere is data, kept as it is.
        let mut object = scheduler();
        object["spec"] = json!({ "metadata": { "annotations": { "a": "b" } } });
        let Slim(dynamic) = serde_json::from_value::<Slim<DynamicObject>>(object).unwrap();
        assert_eq!(dynamic.data["spec"]["metadata"]["annotations"]["a"], "b");
    }

    #[test]
    fn escaped_keys_are_read_and_dropped_fields_are_never_built() {
        // `metad\u0061ta` is `metadata` once unescaped; a malformed managedFields is skipped,
        // not deserialized.
        let text = scheduler()
            .to_string()
            .replacen("\"metadata\"", "\"metad\\u0061ta\"", 1)
            .replacen("\"managedFields\":[", "\"managedFields\":[7,", 1);
        assert!(serde_json::from_str::<TidalScheduler>(&text).is_err());

        let Slim(slim) = serde_json::from_str::<Slim<TidalScheduler>>(&text).unwrap();
        assert_eq!(slim.metadata.name.as_deref(), Some("shop"));
        assert!(slim.metadata.managed_fields.is_none());
    }

    #[test]
    fn errors_elsewhere_are_still_reported() {
        let mut object = scheduler();
        object["metadata"]["labels"] = json!("not a map");
        let error = serde_json::from_value::<Slim<TidalScheduler>>(object).unwrap_err();
        assert!(error.to_string().contains("invalid type"), "{error}");

        let error = serde_json::from_str::<Slim<TidalScheduler>>("[1]").unwrap_err();
        assert!(error.to_string().contains("invalid"), "{error}");
    }
}
