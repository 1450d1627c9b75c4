//! Declare and verify: the redrive policy is in place, and `verify` names
//! what is missing or wrong instead of creating it.

use parkway::{ErrorKind, RetryPolicy, TopologyMode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_accepts_a_declared_topology_and_names_what_is_missing() {
    let p = RetryPolicy::builder().max_attempts(7).build().unwrap();
    let declared = crate::transport(&p, |c| c.receive_margin = 3).await;
    assert_eq!(declared.max_receive_count(), 10, "max_attempts + margin");
    let name = declared.queue_url().rsplit('/').next().unwrap().to_owned();

    let mut c = crate::config_for(&name);
    c.topology = TopologyMode::Verify;
    let verified = crate::connect(c, &p).await;
    assert_eq!(verified.max_receive_count(), 10);
    assert_eq!(
        verified.dead_letter_queue_url(),
        declared.dead_letter_queue_url()
    );

    // A budget the redrive policy would cut short is refused.
    let greedy = RetryPolicy::builder().max_attempts(10).build().unwrap();
    let mut c = crate::config_for(&name);
    c.topology = TopologyMode::Verify;
    let e = parkway_sqs::SqsTransport::connect(c, [&greedy])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Topology, "{e}");
    assert!(e.to_string().contains("maxReceiveCount 10"), "{e}");

    // A missing queue is named, not created.
    let mut c = crate::config_for("pw-test-never-declared");
    c.topology = TopologyMode::Verify;
    let e = parkway_sqs::SqsTransport::connect(c, [&p])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Topology, "{e}");
    assert!(e.to_string().contains("pw-test-never-declared"), "{e}");
    verified.close().await;
    declared.delete_queues().await.unwrap();
}
