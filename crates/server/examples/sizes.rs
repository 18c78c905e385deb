//! Prints the in-memory size of per-connection state (a guide for trimming).
fn main() {
    use std::mem::size_of;
    println!(
        "Connection<Session> = {}",
        size_of::<
            herald_server::conn::Connection<
                herald_core::Session,
                herald_server::transport::ws::WsWire,
            >,
        >()
    );
    println!("Session = {}", size_of::<herald_core::Session>());
    println!("Client = {}", size_of::<herald_core::Client>());
    println!("Outbox = {}", size_of::<herald_core::Outbox>());
    println!("TcpStream = {}", size_of::<tokio::net::TcpStream>());
    println!("Decoder = {}", size_of::<herald_ws::Decoder>());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _c = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (s, _) = listener.accept().await.expect("accept");
        let server =
            herald_server::server::build(herald_server::ServerConfig::default(), Vec::new())
                .expect("build");
        let fut = herald_server::http::serve_connection(s, server.http.clone(), None);
        println!(
            "serve_connection future (handshake phase) = {}",
            std::mem::size_of_val(&fut)
        );
    });
}
