//! `bench-hello`: the floor for `bench-cold`. The smallest lambda_http function, built with the
//! same release profile as the receiver: every request answers `200 hello`.

use lambda_http::{service_fn, Body, Error, Request, Response};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::run(service_fn(|_request: Request| async {
        Ok::<_, Error>(Response::new(Body::from("hello")))
    }))
    .await
}
