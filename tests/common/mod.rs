//! Helpers shared by the integration tests. Each test binary uses a part of them.
#![allow(dead_code)]

pub mod audit;
pub mod cluster;
pub mod corpus;
pub mod fixtures;
pub mod holding_proxy;
pub mod lagging_proxy;
pub mod measure;
pub mod process;
pub mod reaper;
pub mod replicas;
pub mod robfig;
pub mod tide;
