//! The application's own tests, each on a fresh database from mongo-social-testing.

use mongo_social::mongodb::bson::doc;
use scratch_app::Desk;

#[tokio::test]
async fn every_agent_sees_a_filed_ticket_in_one_round_trip() {
    let t = mongo_social_testing::test_db("scratch_app_every_agent").await;
    let desk = Desk::open(&t.db, &["ann", "bob"]).await.unwrap();
    desk.file("carol", "printer on fire").await.unwrap();
    desk.file("dave", "no coffee").await.unwrap();

    t.commands.reset();
    let queue = desk.queue("bob", 10).await.unwrap();
    let texts: Vec<&str> = queue.iter().map(|m| m.payload.as_str()).collect();
    assert_eq!(texts, ["no coffee", "printer on fire"]);
    assert_eq!(t.commands.names(), ["find"]);
    assert_eq!(desk.queue("ann", 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_test_database_is_dropped_afterwards() {
    let name = {
        let t = mongo_social_testing::test_db("scratch_app_dropped_afterwards").await;
        t.collection::<mongo_social::mongodb::bson::Document>("notes")
            .insert_one(doc! { "n": 1 })
            .await
            .unwrap();
        t.db.name().to_owned()
    };
    let client = mongo_social_testing::client().await;
    let names = client.list_database_names().await.unwrap();
    assert!(!names.contains(&name), "{name} is still there: {names:?}");
}
