//! A tiny application on mongo-social: a support desk whose agents get each ticket in their
//! inbox.

use mongo_social::inbox::{FanOutOnWrite, InboxStore, Message, NewMessage};
use mongo_social::mongodb::Database;
use mongo_social::page::PageRequest;

/// The desk: tickets fanned out to every agent's inbox.
pub struct Desk {
    inbox: FanOutOnWrite<String>,
    agents: Vec<String>,
}

impl Desk {
    /// A desk in `db` with these agents.
    pub async fn open(db: &Database, agents: &[&str]) -> mongo_social::Result<Self> {
        let inbox = FanOutOnWrite::builder(db).build()?;
        inbox.create_indexes().await?;
        let agents = agents.iter().map(|agent| agent.to_string()).collect();
        Ok(Self { inbox, agents })
    }

    /// Files a ticket from `customer`: every agent gets it.
    pub async fn file(&self, customer: &str, text: &str) -> mongo_social::Result<()> {
        let message = NewMessage::new(customer, self.agents.iter(), text.to_owned());
        self.inbox.send(message).await?;
        Ok(())
    }

    /// The newest tickets in `agent`'s inbox, newest first.
    pub async fn queue(&self, agent: &str, n: usize) -> mongo_social::Result<Vec<Message<String>>> {
        Ok(self
            .inbox
            .inbox_page(agent, PageRequest::first(n))
            .await?
            .items)
    }
}
