//! The web service's routes, handlers and error mapping: what `main.rs` serves, and what
//! `tests/web_service.rs` includes (through `#[path]`) to drive the same code over real HTTP.
//!
//! | method | path | store call | answer |
//! |---|---|---|---|
//! | `POST` | `/users/{user}/messages` | `send` from `user` (body `{to, text}`; header `Idempotency-Key`) | 201, the message |
//! | `GET` | `/users/{user}/inbox?limit=&after=` | `inbox_page` | a page of messages |
//! | `GET` | `/users/{user}/inbox/unread` | `unread_count` | `{unread}` |
//! | `POST` | `/users/{user}/inbox/read?up_to=` | `mark_read_up_to` that message, or `mark_all_read` | 204 |
//! | `POST` | `/discussions/{d}/comments` | `post` (body `{author: {id, name}, text}`; `Idempotency-Key`) | 201, the comment |
//! | `GET` | `/discussions/{d}/comments?sort=best&limit=&after=` | `ranked` top level (`sort`: best, hot, top, controversial) | a page of comments |
//! | `GET` | `/discussions/{d}/comments?order=newest&limit=&after=` | `chronological` (`order`: oldest, newest) | a page of comments |
//! | `GET` | `/discussions/{d}/comments/{link}` | `get` | the comment |
//! | `POST` | `/discussions/{d}/comments/{link}/replies` | `reply` (as a post) | 201, the reply |
//! | `GET` | `/discussions/{d}/comments/{link}/replies?sort=&limit=&after=` | `ranked` replies of `link` | a page of comments |
//! | `PUT` | `/discussions/{d}/comments/{link}/votes/{user}` | `vote` (body `{vote: "up" \| "down"}`) | `{previous}` |
//! | `DELETE` | `/discussions/{d}/comments/{link}/votes/{user}` | `retract_vote` | `{previous}` |
//! | `GET` | `/discussions/{d}/thread?sort=&depth=&limit=&after=` | `ranked_thread` | a page of threads |
//! | `GET` | `/users/{user}/notifications?limit=&after=` | notification groups `page` | a page of groups |
//! | `GET` | `/users/{user}/notifications/counts` | `counts` | `{unseen, unread}` |
//! | `POST` | `/users/{user}/notifications/read` | `mark_all_read` | `{marked}` |
//!
//! A comment's link (a slug path such as `k3p0/x9a2` in `PerComment`) is one path segment:
//! a client percent-encodes its `/` (`%2F`), and axum's `Path` decodes it. A cursor goes into
//! `?after=` as it is (it is URL-safe), and `Query` decodes and checks it (a `Cursor` field).
//!
//! Every failure answers `{"error": {"kind", "message", "retryable"}}` with the status
//! [`status_of`] gives its [`Error`]; a request the routes cannot decode (a bad cursor, sort or
//! body) answers 400 with the kind `invalid_input`.
//!
//! The user is named in the path to keep the example short; a real service takes it from its
//! authentication.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use mongo_social::comments::{Author, Comment, NewComment, Order, PerComment, Sort, Thread, Vote};
use mongo_social::inbox::DynInboxLifecycle;
use mongo_social::inbox::UpTo;
use mongo_social::mongodb::Database;
use mongo_social::notifications::{Counts, Group};
use mongo_social::prelude::*;
use mongo_social::{
    inbox::MessageId, retry::RetryPolicy, Cursor, Error, FanOutOnWrite, Message, NewMessage,
    NotificationStore, Page, PageRequest,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A chat message: the inbox's payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    /// What it says.
    pub text: String,
}

/// The notifications' data: none (a reply's group says who replied to what).
pub type NoData = ();

/// The service's stores.
#[derive(Clone, Debug)]
pub struct App {
    /// Direct and group messages, a copy per recipient.
    pub inbox: Arc<DynInboxLifecycle<Chat>>,
    /// Comments, one document per comment; a discussion is created by its first post, and a
    /// reply notifies the parent's author.
    pub comments: Arc<PerComment>,
    /// Grouped notifications ("bob and 2 others replied to your comment").
    pub notifications: NotificationStore<NoData>,
}

impl App {
    /// The stores on `db`, each retrying under `retry` (the policy the client was built with,
    /// [`RetryPolicy::apply_to`]).
    pub fn new(db: &Database, retry: RetryPolicy) -> mongo_social::Result<Self> {
        let notifications = NotificationStore::builder(db).retry_policy(retry).build()?;
        let comments = PerComment::builder(db)
            .retry_policy(retry)
            .create_discussions_on_post(true)
            .notifier(Arc::new(notifications.clone()))
            .build()?;
        let inbox = FanOutOnWrite::<Chat>::builder(db)
            .retry_policy(retry)
            .build()?;
        Ok(Self {
            inbox: Arc::new(inbox),
            comments: Arc::new(comments),
            notifications,
        })
    }

    /// Creates every store's indexes: safe on every start.
    pub async fn create_indexes(&self) -> mongo_social::Result<()> {
        self.inbox.create_indexes().await?;
        self.comments.create_indexes().await?;
        self.notifications.create_indexes().await
    }

    /// Starts the worker that delivers the reply notifications whose first attempt failed.
    pub fn start_outbox_worker(&self) -> Option<mongo_social::jobs::Worker> {
        self.comments.outbox().map(|outbox| outbox.start_worker())
    }
}

/// The service's routes on `app`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/users/{user}/messages", post(send))
        .route("/users/{user}/inbox", get(inbox_page))
        .route("/users/{user}/inbox/unread", get(unread))
        .route("/users/{user}/inbox/read", post(mark_inbox_read))
        .route(
            "/discussions/{discussion}/comments",
            post(post_comment).get(comments),
        )
        .route("/discussions/{discussion}/comments/{link}", get(comment))
        .route(
            "/discussions/{discussion}/comments/{link}/replies",
            post(reply).get(replies),
        )
        .route(
            "/discussions/{discussion}/comments/{link}/votes/{user}",
            put(vote).delete(retract_vote),
        )
        .route("/discussions/{discussion}/thread", get(thread))
        .route("/users/{user}/notifications", get(notifications))
        .route(
            "/users/{user}/notifications/counts",
            get(notification_counts),
        )
        .route(
            "/users/{user}/notifications/read",
            post(mark_notifications_read),
        )
        .with_state(app)
}

/// Serves `app` on `listener` until the process stops.
pub async fn serve(listener: tokio::net::TcpListener, app: App) -> std::io::Result<()> {
    axum::serve(listener, router(app)).await
}

// --- Errors -----------------------------------------------------------------------------------

/// How long a client should wait before trying a 503 again.
pub const RETRY_AFTER_SECONDS: u32 = 2;

/// The HTTP status of every [`Error`]: the one place the crate's failures meet HTTP.
pub fn status_of(error: &Error) -> StatusCode {
    match error {
        Error::InvalidInput { .. } => StatusCode::BAD_REQUEST,
        Error::NotFound { .. } => StatusCode::NOT_FOUND,
        Error::AlreadyExists { .. } | Error::Conflict { .. } | Error::Precondition { .. } => {
            StatusCode::CONFLICT
        }
        Error::Forbidden { .. } => StatusCode::FORBIDDEN,
        Error::Unsupported { .. } => StatusCode::NOT_IMPLEMENTED,
        // Worth another try a little later: the database is down, or busy.
        Error::Unreachable { .. } | Error::RetriesExhausted { .. } | Error::Timeout { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        // The server refused it, a stored document did not decode, the store was built wrong,
        // and whatever variant a later version adds.
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A failed request: its status and the JSON body saying why.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
}

/// The body of every failed request: `{"error": {...}}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// [`Error::kind`]: `invalid_input`, `not_found`, `conflict`, `unreachable`, ...
    pub kind: String,
    /// In words (for a 500, only that: the detail goes to the service's log).
    pub message: String,
    /// Whether the same request may succeed later ([`Error::is_retryable`]).
    pub retryable: bool,
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let status = status_of(&error);
        let message = if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            eprintln!("request failed: {error}");
            "internal error".to_owned()
        } else {
            error.to_string()
        };
        Self {
            status,
            body: ErrorBody {
                error: ErrorDetail {
                    kind: error.kind().to_owned(),
                    message,
                    retryable: error.is_retryable(),
                },
            },
        }
    }
}

impl ApiError {
    /// A request the routes could not decode (a path, query string, body or header that is
    /// not the route's, a bad cursor, sort or vote name): 400, kind `invalid_input`, as the
    /// crate's own input errors.
    fn undecodable(message: String) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            body: ErrorBody {
                error: ErrorDetail {
                    kind: "invalid_input".to_owned(),
                    message,
                    retryable: false,
                },
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

type Answer<T> = Result<T, ApiError>;

// --- Extractors whose rejections answer in the service's error format -------------------------

/// [`Query`], refused as [`ApiError`].
pub struct Q<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Answer<Self> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Q(value))
            .map_err(|rejection: QueryRejection| ApiError::undecodable(rejection.body_text()))
    }
}

/// [`Path`], refused as [`ApiError`].
pub struct P<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Answer<Self> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| P(value))
            .map_err(|rejection: PathRejection| ApiError::undecodable(rejection.body_text()))
    }
}

/// [`Json`] of a request body, refused as [`ApiError`].
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Answer<Self> {
        Json::<T>::from_request(request, state)
            .await
            .map(|Json(value)| Body(value))
            .map_err(|rejection: JsonRejection| ApiError::undecodable(rejection.body_text()))
    }
}

/// The request's `Idempotency-Key` header, if any: the key its create is made once under.
fn idempotency_key(headers: &HeaderMap) -> Answer<Option<String>> {
    headers
        .get("idempotency-key")
        .map(|key| {
            key.to_str().map(str::to_owned).map_err(|_| {
                ApiError::undecodable("the Idempotency-Key header is not text".to_owned())
            })
        })
        .transpose()
}

// --- Pages ------------------------------------------------------------------------------------

/// The page a request asks for: `?limit=20&after=<cursor>`.
#[derive(Debug, Deserialize)]
pub struct PageQuery {
    /// How many (default 20).
    pub limit: Option<usize>,
    /// The `next` of the page before, as it came (checked as it is decoded).
    pub after: Option<Cursor>,
}

/// The page size when a request names none.
pub const DEFAULT_LIMIT: usize = 20;

fn page_request(limit: Option<usize>, after: Option<Cursor>) -> PageRequest {
    PageRequest {
        limit: limit.unwrap_or(DEFAULT_LIMIT),
        after,
    }
}

// --- Inbox ------------------------------------------------------------------------------------

/// A message to send.
#[derive(Debug, Serialize, Deserialize)]
pub struct SendBody {
    /// The recipients' user ids.
    pub to: Vec<String>,
    /// What it says.
    pub text: String,
}

async fn send(
    State(app): State<App>,
    P(user): P<String>,
    headers: HeaderMap,
    Body(body): Body<SendBody>,
) -> Answer<(StatusCode, Json<Message<Chat>>)> {
    let mut message = NewMessage::new(user, body.to, Chat { text: body.text });
    if let Some(key) = idempotency_key(&headers)? {
        message = message.with_key(key);
    }
    let sent = app.inbox.send(message).await?;
    Ok((StatusCode::CREATED, Json(sent.message)))
}

async fn inbox_page(
    State(app): State<App>,
    P(user): P<String>,
    Q(query): Q<PageQuery>,
) -> Answer<Json<Page<Message<Chat>>>> {
    let request = page_request(query.limit, query.after);
    Ok(Json(app.inbox.inbox_page(&user, request).await?))
}

/// An unread count.
#[derive(Debug, Serialize, Deserialize)]
pub struct Unread {
    /// Messages not read.
    pub unread: u64,
}

async fn unread(State(app): State<App>, P(user): P<String>) -> Answer<Json<Unread>> {
    let unread = app.inbox.unread_count(&user).await?;
    Ok(Json(Unread { unread }))
}

/// How far to mark an inbox read: `?up_to=<message id>`, or everything.
#[derive(Debug, Deserialize)]
pub struct MarkReadQuery {
    /// This message and every older one; all of them without it.
    pub up_to: Option<MessageId>,
}

async fn mark_inbox_read(
    State(app): State<App>,
    P(user): P<String>,
    Q(query): Q<MarkReadQuery>,
) -> Answer<StatusCode> {
    match query.up_to {
        Some(id) => app.inbox.mark_read_up_to(&user, UpTo::Message(id)).await?,
        None => app.inbox.mark_all_read(&user).await?,
    }
    Ok(StatusCode::NO_CONTENT)
}

// --- Comments ---------------------------------------------------------------------------------

/// A comment to post or a reply.
#[derive(Debug, Serialize, Deserialize)]
pub struct CommentBody {
    /// Who writes it.
    pub author: Author,
    /// What it says.
    pub text: String,
}

fn new_comment(headers: &HeaderMap, body: CommentBody) -> Answer<NewComment> {
    let comment = NewComment::new(body.author, body.text);
    Ok(match idempotency_key(headers)? {
        Some(key) => comment.with_key(key),
        None => comment,
    })
}

async fn post_comment(
    State(app): State<App>,
    P(discussion): P<String>,
    headers: HeaderMap,
    Body(body): Body<CommentBody>,
) -> Answer<(StatusCode, Json<Comment>)> {
    let comment = new_comment(&headers, body)?;
    let posted = app.comments.post(&discussion, comment).await?;
    Ok((StatusCode::CREATED, Json(posted)))
}

async fn reply(
    State(app): State<App>,
    P((discussion, link)): P<(String, String)>,
    headers: HeaderMap,
    Body(body): Body<CommentBody>,
) -> Answer<(StatusCode, Json<Comment>)> {
    let comment = new_comment(&headers, body)?;
    let posted = app.comments.reply(&discussion, &link, comment).await?;
    Ok((StatusCode::CREATED, Json(posted)))
}

/// A page of comments: ranked by `sort` (the default, `best`), or by posting time in `order`.
#[derive(Debug, Deserialize)]
pub struct CommentsQuery {
    /// `best`, `hot`, `top` or `controversial`.
    pub sort: Option<Sort>,
    /// `oldest` or `newest`: every comment by posting time instead of a ranking.
    pub order: Option<Order>,
    /// How many (default 20).
    pub limit: Option<usize>,
    /// The `next` of the page before.
    pub after: Option<Cursor>,
}

async fn comments(
    State(app): State<App>,
    P(discussion): P<String>,
    Q(query): Q<CommentsQuery>,
) -> Answer<Json<Page<Comment>>> {
    let request = page_request(query.limit, query.after);
    let page = match (query.order, query.sort) {
        (Some(_), Some(_)) => {
            return Err(ApiError::undecodable(
                "a page is ranked by `sort` or in `order`, not both".to_owned(),
            ))
        }
        (Some(order), None) => {
            app.comments
                .chronological(&discussion, order, request)
                .await?
        }
        (None, sort) => {
            let sort = sort.unwrap_or(Sort::Best);
            app.comments
                .ranked(&discussion, None, sort, request)
                .await?
        }
    };
    Ok(Json(page))
}

async fn comment(
    State(app): State<App>,
    P((discussion, link)): P<(String, String)>,
) -> Answer<Json<Comment>> {
    Ok(Json(app.comments.get(&discussion, &link).await?))
}

/// A page of a comment's replies, ranked.
#[derive(Debug, Deserialize)]
pub struct RankedQuery {
    /// `best` (the default), `hot`, `top` or `controversial`.
    pub sort: Option<Sort>,
    /// How many (default 20).
    pub limit: Option<usize>,
    /// The `next` of the page before.
    pub after: Option<Cursor>,
}

async fn replies(
    State(app): State<App>,
    P((discussion, link)): P<(String, String)>,
    Q(query): Q<RankedQuery>,
) -> Answer<Json<Page<Comment>>> {
    let sort = query.sort.unwrap_or(Sort::Best);
    let request = page_request(query.limit, query.after);
    let page = app
        .comments
        .ranked(&discussion, Some(&link), sort, request)
        .await?;
    Ok(Json(page))
}

/// A vote to cast.
#[derive(Debug, Serialize, Deserialize)]
pub struct VoteBody {
    /// `up` or `down`.
    pub vote: Vote,
}

/// The vote a vote or retraction replaced.
#[derive(Debug, Serialize, Deserialize)]
pub struct Voted {
    /// `up`, `down`, or `null` for none.
    pub previous: Option<Vote>,
}

async fn vote(
    State(app): State<App>,
    P((discussion, link, user)): P<(String, String, String)>,
    Body(body): Body<VoteBody>,
) -> Answer<Json<Voted>> {
    let previous = app
        .comments
        .vote(&discussion, &link, &user, body.vote)
        .await?;
    Ok(Json(Voted { previous }))
}

async fn retract_vote(
    State(app): State<App>,
    P((discussion, link, user)): P<(String, String, String)>,
) -> Answer<Json<Voted>> {
    let previous = app.comments.retract_vote(&discussion, &link, &user).await?;
    Ok(Json(Voted { previous }))
}

/// A ranked thread: `?sort=best&depth=2&limit=10&after=<cursor of the top level>`.
#[derive(Debug, Deserialize)]
pub struct ThreadQuery {
    /// `best` (the default), `hot`, `top` or `controversial`.
    pub sort: Option<Sort>,
    /// Levels of replies under the top level (default 2).
    pub depth: Option<usize>,
    /// Comments per level (default 20).
    pub limit: Option<usize>,
    /// The `next` of the top level before.
    pub after: Option<Cursor>,
}

/// The deepest a thread request may read.
pub const MAX_THREAD_DEPTH: usize = 8;

async fn thread(
    State(app): State<App>,
    P(discussion): P<String>,
    Q(query): Q<ThreadQuery>,
) -> Answer<Json<Page<Thread>>> {
    let sort = query.sort.unwrap_or(Sort::Best);
    let depth = query.depth.unwrap_or(2).min(MAX_THREAD_DEPTH);
    let request = page_request(query.limit, query.after);
    let thread = app
        .comments
        .ranked_thread(&discussion, sort, request, depth)
        .await?;
    Ok(Json(thread))
}

// --- Notifications ----------------------------------------------------------------------------

async fn notifications(
    State(app): State<App>,
    P(user): P<String>,
    Q(query): Q<PageQuery>,
) -> Answer<Json<Page<Group<NoData>>>> {
    let request = page_request(query.limit, query.after);
    Ok(Json(app.notifications.page(&user, request).await?))
}

async fn notification_counts(State(app): State<App>, P(user): P<String>) -> Answer<Json<Counts>> {
    Ok(Json(app.notifications.counts(&user).await?))
}

/// How many groups a mark changed.
#[derive(Debug, Serialize, Deserialize)]
pub struct Marked {
    /// Groups marked read.
    pub marked: u64,
}

async fn mark_notifications_read(
    State(app): State<App>,
    P(user): P<String>,
) -> Answer<Json<Marked>> {
    let marked = app.notifications.mark_all_read(&user, None).await?;
    Ok(Json(Marked { marked }))
}
