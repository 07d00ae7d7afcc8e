//! What a not-found or already-exists error names ([`Entity`]).

use std::fmt;

/// What an [`Error::NotFound`] or an [`Error::AlreadyExists`] names. Displayed as the words of
/// the error's message (`ParentComment` as "parent comment").
///
/// [`Error::NotFound`]: super::Error::NotFound
/// [`Error::AlreadyExists`]: super::Error::AlreadyExists
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Entity {
    /// A post of the feed.
    Post,
    /// A user: of the follow graph, the feed or the delivery.
    User,
    /// A user's extended profile in the feed.
    ExtendedUser,
    /// A username, unique among the feed's users.
    Username,
    /// A group of the follow graph.
    Group,
    /// A discussion comments are posted to.
    Discussion,
    /// A comment, named by its link.
    Comment,
    /// The comment a reply answers, named by its link.
    ParentComment,
    /// The propagation of a user's new username to the copies of their chunk.
    Propagation,
    /// The shared recipient list of a message with many recipients.
    RecipientList,
    /// A group of a recipient's notifications.
    Notification,
    /// A message in an inbox: one the owner never received, deleted, or pruned; or one that
    /// was retracted.
    Message,
    /// A comment that was deleted: an edit, a delete or a vote named it.
    DeletedComment,
    /// A migration between strategies ([`crate::migrate`]).
    Migration,
}

impl Entity {
    /// The words for it in error messages (`"parent comment"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Entity::Post => "post",
            Entity::User => "user",
            Entity::ExtendedUser => "extended user",
            Entity::Username => "username",
            Entity::Group => "group",
            Entity::Discussion => "discussion",
            Entity::Comment => "comment",
            Entity::ParentComment => "parent comment",
            Entity::Propagation => "propagation",
            Entity::RecipientList => "recipient list",
            Entity::Notification => "notification",
            Entity::Message => "message",
            Entity::DeletedComment => "deleted comment",
            Entity::Migration => "migration",
        }
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn entities_read_as_the_words_they_replace() {
        let words = [
            (Entity::Post, "post"),
            (Entity::User, "user"),
            (Entity::ExtendedUser, "extended user"),
            (Entity::Username, "username"),
            (Entity::Group, "group"),
            (Entity::Discussion, "discussion"),
            (Entity::Comment, "comment"),
            (Entity::ParentComment, "parent comment"),
            (Entity::Propagation, "propagation"),
            (Entity::RecipientList, "recipient list"),
            (Entity::Message, "message"),
        ];
        for (entity, text) in words {
            assert_eq!(entity.to_string(), text);
        }
        let missing = Error::NotFound {
            what: Entity::ParentComment,
            id: "0a1b/2c3d".into(),
        };
        assert_eq!(missing.to_string(), "unknown parent comment `0a1b/2c3d`");
        assert!(missing.is_not_found() && !missing.is_invalid_input());
        let taken = Error::AlreadyExists {
            what: Entity::Username,
            id: "ann".into(),
        };
        assert_eq!(taken.to_string(), "username `ann` already exists");
        assert!(taken.is_already_exists() && !taken.is_not_found());
    }
}
