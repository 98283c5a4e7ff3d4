//! gRPC with tonic (the real gRPC client, HTTP/2 over TLS), no generated stubs:
//! the generic unary call with prost's codec.
use crate::config::Config;
use ferry_proto::psdb::v1alpha1::{ExecuteRequest, ExecuteResponse};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

pub async fn channel(cfg: &Config) -> Channel {
    crate::config::install_crypto_provider();
    let pem = std::fs::read(&cfg.ca_pem).expect("CA certificate");
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pem))
        .domain_name("localhost");
    Endpoint::from_shared(cfg.base_url())
        .expect("endpoint URL")
        .tls_config(tls)
        .expect("TLS config")
        .connect()
        .await
        .expect("gRPC connection to Ferry")
}

pub async fn unary<Req, Resp>(
    channel: Channel,
    path: &'static str,
    message: Req,
    authorization: Option<&str>,
) -> Result<tonic::Response<Resp>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut request = tonic::Request::new(message);
    if let Some(auth) = authorization {
        request
            .metadata_mut()
            .insert("authorization", auth.parse().expect("ascii header"));
    }
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    grpc.unary(request, http::uri::PathAndQuery::from_static(path), codec)
        .await
}

pub async fn execute(
    channel: Channel,
    cfg: &Config,
    query: &str,
) -> Result<ExecuteResponse, tonic::Status> {
    let req = ExecuteRequest {
        query: query.into(),
        ..Default::default()
    };
    execute_request(channel, cfg, req).await
}

pub async fn execute_request(
    channel: Channel,
    cfg: &Config,
    req: ExecuteRequest,
) -> Result<ExecuteResponse, tonic::Status> {
    let auth = cfg.basic_auth();
    unary(channel, crate::connect::EXECUTE, req, Some(&auth))
        .await
        .map(tonic::Response::into_inner)
}
