//! The fault-injecting proxy against the real server, and the stores riding out its faults.

use std::time::Duration;

use bson::doc;
use mongo_social::testing::{self, fault_proxy::FaultProxy};

#[tokio::test]
async fn proxy_forwards_cuts_refuses_and_stops() {
    let proxy = FaultProxy::to_test_server();
    let client = proxy
        .client_with(|options| options.server_selection_timeout = Some(Duration::from_secs(1)))
        .await;
    let db = client.database(&testing::database_name("proxy_forwards"));
    db.run_command(doc! { "ping": 1 })
        .await
        .expect("ping through the proxy");
    assert!(proxy.connections_accepted() >= 1);
    assert!(proxy.open_connections() >= 1);

    // Refused for longer than the client waits for a server: the command fails, transiently.
    proxy.outage(Duration::from_secs(3));
    assert!(proxy.is_refusing());
    let error = db
        .run_command(doc! { "ping": 1 })
        .await
        .expect_err("no server while connections are refused");
    assert!(
        mongo_social::Error::from(error).is_retryable(),
        "an outage is transient"
    );

    // Once the outage ends, the client reconnects by itself.
    let mut answered = false;
    for _ in 0..40 {
        if db.run_command(doc! { "ping": 1 }).await.is_ok() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(answered, "the server answers again after the outage");
    assert!(
        proxy.connections_refused() >= 1,
        "reconnections were refused"
    );

    // A delay holds traffic but loses none.
    proxy.delay(Duration::from_millis(50));
    db.run_command(doc! { "ping": 1 })
        .await
        .expect("delayed ping");
    proxy.delay(Duration::ZERO);

    let address = proxy.address();
    drop(proxy);
    assert!(
        std::net::TcpStream::connect(address).is_err(),
        "a dropped proxy listens no more"
    );
}

#[tokio::test]
async fn proxy_forwards_only_to_loopback() {
    let error = FaultProxy::start("192.0.2.1:27017").expect_err("not loopback");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}
