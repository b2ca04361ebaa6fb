//! Helpers shared by the integration tests. Each test binary uses a part of them.
#![allow(dead_code)]

pub mod corpus;
pub mod robfig;
