//! Prints the in-memory size of per-connection state (a guide for trimming).
fn main() {
    use std::mem::size_of;
    println!(
        "Connection<Session> = {}",
        size_of::<herald_server::conn::Connection<herald_core::Session, herald_server::ws::WsWire>>(
        )
    );
    println!("Session = {}", size_of::<herald_core::Session>());
    println!("Client = {}", size_of::<herald_core::Client>());
    println!("Outbox = {}", size_of::<herald_core::Outbox>());
    println!("TcpStream = {}", size_of::<tokio::net::TcpStream>());
    println!("Decoder = {}", size_of::<herald_ws::Decoder>());
}
