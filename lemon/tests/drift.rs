//! Golden-config drift from the nodes' spool exports: the versions travel as
//! inventory records, lemon.db keeps the latest of each, and the drift
//! report lists, per SKU, the nodes that differ from the majority.

use lemon::document::{self, Document};
use lemon::drift::{self, Majority};
use lemon::{db, ingest};
use lemonade_spool::{Body, Record};
use std::time::Duration;

const H100: &str = "8x NVIDIA H100 80GB HBM3";

fn inventory(node: &str, seq: u64, at: i64, item: &str, value: &str) -> Record {
    let (check, entity) = item.split_once('/').unwrap();
    Record {
        seq,
        epoch: "e1".into(),
        node: node.into(),
        at,
        body: Body::Inventory {
            check: check.into(),
            entity: entity.into(),
            value: value.into(),
        },
    }
}

/// What one node's export holds: its SKU, driver, kernel and a VBIOS.
fn export(node: &str, sku: &str, driver: &str) -> Vec<Record> {
    vec![
        inventory(node, 1, 1000, "versions/sku", sku),
        inventory(node, 2, 1000, "versions/driver", driver),
        inventory(node, 3, 1000, "versions/kernel", "5.15.0-105-generic"),
        inventory(node, 4, 1000, "gpu/gpu0", "96.00.89.00.01"),
        inventory(
            node,
            5,
            1000,
            "ecc/gpu0",
            "2 uncorrected ECC errors in its lifetime",
        ),
    ]
}

#[test]
fn the_node_of_a_sku_on_another_driver_is_listed_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    lemonade_spool::write(
        &spool,
        "gpu001",
        &export("gpu001", H100, "550.54.15"),
        1 << 20,
    )
    .unwrap();
    // gpu002 ran the SKU's driver, then was upgraded alone: its latest counts.
    let mut upgraded = export("gpu002", H100, "550.54.15");
    upgraded.push(inventory("gpu002", 6, 2000, "versions/driver", "550.90.07"));
    lemonade_spool::write(&spool, "gpu002", &upgraded, 1 << 20).unwrap();
    lemonade_spool::write(
        &spool,
        "gpu003",
        &export("gpu003", H100, "550.54.15"),
        1 << 20,
    )
    .unwrap();
    // Another SKU on another driver is not drift.
    lemonade_spool::write(
        &spool,
        "cpu001",
        &export("cpu001", "8x NVIDIA A100", "535.161.08"),
        1 << 20,
    )
    .unwrap();
    ingest::spool::ingest_dir(&mut conn, &spool).unwrap();

    let report = drift::from_inventory(&db::inventory::latest_inventory(&conn).unwrap());

    assert_eq!(report.nodes, 4);
    assert_eq!(report.skus.len(), 1, "{report:?}");
    let sku = &report.skus[0];
    assert_eq!((sku.sku.as_str(), sku.nodes), (H100, 3));
    assert_eq!(sku.keys.len(), 1, "only the driver differs: {report:?}");
    let key = &sku.keys[0];
    assert_eq!(key.key, "versions/driver");
    assert_eq!(key.majority, Majority::Value("550.54.15".into()));
    assert_eq!(key.differing.len(), 1);
    assert_eq!(key.differing[0].node, "gpu002");
    assert_eq!(key.differing[0].value.as_deref(), Some("550.90.07"));

    let rows = drift::rows(&report);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].node.as_str(),
            rows[0].value.as_str(),
            rows[0].majority.as_str()
        ),
        ("gpu002", "550.90.07", "550.54.15")
    );
    let doc = Document {
        title: "Lemon report".into(),
        preamble: Vec::new(),
        sections: vec![drift::section(&report)],
    };
    let text = document::text::render(&doc);
    assert!(text.contains(H100) && text.contains("550.54.15"), "{text}");
    let row = text.lines().find(|l| l.contains("gpu002")).unwrap();
    assert!(
        row.contains("driver") && row.contains("550.90.07") && row.contains("550.54.15"),
        "{text}"
    );
    let md = document::markdown::render(&doc);
    assert!(
        md.contains("| driver | gpu002 | 550.90.07 | 550.54.15 |"),
        "{md}"
    );
}

#[test]
fn nodes_without_a_sku_item_are_grouped_by_board_and_gpu_count() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    for (node, bios) in [("n1", "1.6.7"), ("n2", "1.6.7"), ("n3", "1.5.0")] {
        let records = vec![
            inventory(node, 1, 1000, "firmware/board", "DGXH100"),
            inventory(node, 2, 1000, "firmware/bios", bios),
            inventory(node, 3, 1000, "gpu/gpu0", "96.00.89.00.01"),
        ];
        lemonade_spool::write(&spool, node, &records, 1 << 20).unwrap();
    }
    ingest::spool::ingest_dir(&mut conn, &spool).unwrap();
    let report = drift::from_inventory(&db::inventory::latest_inventory(&conn).unwrap());
    let rows = drift::rows(&report);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].sku, "board DGXH100, 1 GPUs");
    assert_eq!(
        (
            rows[0].key.as_str(),
            rows[0].node.as_str(),
            rows[0].value.as_str()
        ),
        ("firmware/bios", "n3", "1.5.0")
    );
}
