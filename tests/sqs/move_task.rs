//! Native bulk redrive: a slow message-move task can be watched and
//! cancelled part-way; rates outside SQS's range are refused up front.

use std::time::Duration;

use parkway::{RetryPolicy, Transport};

use crate::conformance::harness::{WITHIN, eventually, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_task_can_be_cancelled_part_way() {
    let p = RetryPolicy::builder()
        .max_attempts(2)
        .park_on(["PARK_ME"])
        .build()
        .unwrap();
    let t = crate::transport(&p, |_| {}).await;
    let q = crate::queue(&t);
    for i in 0..12 {
        q.publish(&format!("p{i}"), "bad:PARK_ME").await;
    }
    let w = start(&q, p);
    eventually(WITHIN, "twelve parked", || async {
        q.parked().await.len() == 12
    })
    .await;
    w.stop().await;
    for bad in [0, 501] {
        let e = t.start_move_task(Some(bad)).await.unwrap_err();
        assert!(e.to_string().contains("1–500"), "{e}");
    }
    let handle = t.start_move_task(Some(1)).await.unwrap_or_else(|e| {
        panic!("StartMessageMoveTask failed ({e}); the moto fallback does not implement it: run scripts/sqs-start with Python >= 3.13 for LocalStack")
    });
    eventually(WITHIN, "the task moved something", || async {
        t.move_tasks().await.unwrap()[0].moved >= 1
    })
    .await;
    let moved = t.cancel_move_task(&handle).await.unwrap();
    assert!((1..12).contains(&moved), "cancelled part-way after {moved}");
    eventually(WITHIN, "the task is cancelled", || async {
        t.move_tasks().await.unwrap()[0].status != "RUNNING"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let task = t.move_tasks().await.unwrap().remove(0);
    let left = t.parking_lot().browse(100).await.unwrap().len();
    eprintln!("move task cancelled: {task:?}, {left} left parked");
    assert!(
        task.is_finished() || task.status == "CANCELLING",
        "{task:?}"
    );
    assert!(
        left >= 1 && left as i64 + task.moved == 12,
        "{left} left, {} moved",
        task.moved
    );
    q.publisher.teardown().await;
}
