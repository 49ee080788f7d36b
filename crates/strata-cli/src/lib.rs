//! The library half of the `strata` tool: the key and value encodings of
//! its command line and the web view, which a program holding a database
//! open can serve itself ([`web::serve`]).

pub mod codec;
pub mod web;
