//! Messages and their identities (SPEC §2).
//!
//! A [`Message`] is a complete, immutable user-role message minted by the caller (S6). The machine
//! reads nothing but its [`MessageId`]; every other field is carried verbatim (S7, S8), so a message
//! restored from a log written by another implementation comes back out exactly as it was written.
//! Messages travel as [`SharedMessage`] (`Arc<Message>`): the pending list, the durable splice, the
//! notifications, the pre-step request and the `user/message` event all share one allocation.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::fingerprint::Fingerprint;

/// A message as the machine shares it (S8): cloning it bumps a reference count.
///
/// ```
/// use coxswain_core::{Message, SharedMessage};
///
/// let message: SharedMessage = Message::user("m1", "hi").into();
/// let copy = SharedMessage::clone(&message);
/// assert!(SharedMessage::ptr_eq(&message, &copy)); // one allocation, shared
/// ```
pub type SharedMessage = Arc<Message>;

/// The caller-minted identity of a message (S6): an opaque string, unique among the messages
/// currently pending (S9). Cloning it is a reference-count bump.
///
/// ```
/// use coxswain_core::{Message, MessageId};
///
/// let id = MessageId::new("m1");
/// assert_eq!(id.as_str(), "m1");
/// assert_eq!(Message::user("m1", "hi").id(), &id);
/// assert_eq!(MessageId::from("m1"), id);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(Arc<str>);

impl MessageId {
    /// Wraps a caller-minted id.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        MessageId(id.into())
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as an error message shows it ([`ShownId`]): in backticks, a long one elided.
    pub fn shown(&self) -> ShownId<'_> {
        ShownId::new(&self.0)
    }
}

/// An id as every error message shows it: in backticks, its control characters escaped, and an
/// id longer than [`ShownId::MAX_CHARS`] characters cut there, followed by `…` and its full
/// length in bytes, so that a hostile 1 MiB id costs an error message 64 characters, not 1 MiB.
///
/// ```
/// use coxswain_core::{MessageId, ShownId};
///
/// assert_eq!(MessageId::new("m1").shown().to_string(), "`m1`");
/// assert_eq!(ShownId::new("a\nb").to_string(), "`a\\nb`");
/// let long = "a".repeat(1 << 20);
/// assert_eq!(
///     ShownId::new(&long).to_string(),
///     format!("`{}…` (1048576 bytes)", "a".repeat(64))
/// );
///
/// // Bare, for a line that shows ids unquoted (a timeline):
/// assert_eq!(ShownId::bare("m1").to_string(), "m1");
/// assert_eq!(
///     ShownId::bare(&long).to_string(),
///     format!("{}… (1048576 bytes)", "a".repeat(64))
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShownId<'a> {
    id: &'a str,
    quoted: bool,
}

impl<'a> ShownId<'a> {
    /// The most characters of an id an error message shows.
    ///
    /// ```
    /// use coxswain_core::ShownId;
    ///
    /// let id = "x".repeat(ShownId::MAX_CHARS);
    /// assert_eq!(ShownId::bare(&id).to_string(), id); // at the limit: whole
    /// ```
    pub const MAX_CHARS: usize = 64;

    /// Shows `id` in backticks.
    pub fn new(id: &'a str) -> Self {
        ShownId { id, quoted: true }
    }

    /// Shows `id` without backticks (elided and escaped all the same).
    pub fn bare(id: &'a str) -> Self {
        ShownId { id, quoted: false }
    }
}

impl fmt::Display for ShownId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        let quote = if self.quoted { "`" } else { "" };
        f.write_str(quote)?;
        let mut chars = self.id.chars();
        for c in chars.by_ref().take(ShownId::MAX_CHARS) {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        if chars.next().is_some() {
            write!(f, "…{quote} ({} bytes)", self.id.len())
        } else {
            f.write_str(quote)
        }
    }
}

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Borrow<str> for MessageId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for MessageId {
    fn from(id: &str) -> Self {
        MessageId::new(id)
    }
}

impl From<String> for MessageId {
    fn from(id: String) -> Self {
        MessageId::new(id)
    }
}

impl Serialize for MessageId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(MessageId::new(&*id))
    }
}

/// A user-role message: `{ id, source, content }` (S6).
///
/// Only [`id`](Message::id) means anything to the machine. The other fields (normally `source`,
/// whose `kind` tells a human prompt from injected context (S7), and `content`) are kept as the
/// JSON object they were given in, so they serialize back byte-for-byte equal in value.
///
/// # Examples
///
/// ```
/// use coxswain_core::Message;
/// use serde_json::json;
///
/// let prompt = Message::user("m1", "What changed?");
/// assert_eq!(prompt.source_kind(), Some("user"));
/// assert_eq!(prompt.content(), Some(&json!("What changed?")));
///
/// let context = Message::new("c1", json!({"kind": "plugin"}), json!("notes"));
/// assert_eq!(context.source(), Some(&json!({"kind": "plugin"})));
///
/// // Any JSON object with a string `id` is a message; extra fields are carried verbatim.
/// let wire = json!({"id": "m2", "content": "hi", "lang": "en"});
/// let parsed = Message::from_json(&wire).expect("a string id");
/// assert_eq!(parsed.id().as_str(), "m2");
/// assert_eq!(parsed.fields().get("lang"), Some(&json!("en")));
/// assert_eq!(serde_json::to_value(&parsed)?, wire);
/// assert!(Message::from_json(&json!({"id": 7})).is_none());
///
/// let mut fields = serde_json::Map::new();
/// fields.insert("content".into(), json!("again"));
/// assert_eq!(Message::from_fields("m3", fields).content(), Some(&json!("again")));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    id: MessageId,
    /// S56's digest of `source` and `content`, computed once here (the fields never change).
    /// Equal fields give equal fingerprints, so the derived equality stays the fields'.
    fingerprint: Fingerprint,
    fields: Map<String, Value>,
}

impl Message {
    /// A message `{ id, source, content }`. `source` should be an object with a string `kind`
    /// (`{"kind": "user"}` for a human prompt); the machine does not inspect it.
    pub fn new(id: impl Into<MessageId>, source: Value, content: Value) -> Self {
        let mut fields = Map::new();
        fields.insert("source".to_owned(), source);
        fields.insert("content".to_owned(), content);
        Message::with(id.into(), fields)
    }

    /// A human prompt: `{ id, source: { kind: "user" }, content }`.
    pub fn user(id: impl Into<MessageId>, content: impl Into<Value>) -> Self {
        Message::new(id, serde_json::json!({ "kind": "user" }), content.into())
    }

    /// A message from its id and any other fields, carried verbatim. An `id` key among `fields`
    /// is ignored: the explicit id wins.
    pub fn from_fields(id: impl Into<MessageId>, mut fields: Map<String, Value>) -> Self {
        fields.remove("id");
        Message::with(id.into(), fields)
    }

    /// Parses a message from a JSON value: an object with a string `id`. `None` otherwise.
    pub fn from_json(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        let id = object.get("id")?.as_str()?;
        let mut fields = object.clone();
        fields.remove("id");
        Some(Message::with(MessageId::new(id), fields))
    }

    /// The one place a message is assembled: its fingerprint is computed here.
    fn with(id: MessageId, fields: Map<String, Value>) -> Self {
        let fingerprint = Fingerprint::of(fields.get("source"), fields.get("content"));
        Message {
            id,
            fingerprint,
            fields,
        }
    }

    /// The caller-minted id.
    pub fn id(&self) -> &MessageId {
        &self.id
    }

    /// The `source` field, if present.
    pub fn source(&self) -> Option<&Value> {
        self.fields.get("source")
    }

    /// `source.kind`, if present: `"user"` for a human prompt (S7).
    pub fn source_kind(&self) -> Option<&str> {
        self.source()?.get("kind")?.as_str()
    }

    /// The `content` field, if present.
    pub fn content(&self) -> Option<&Value> {
        self.fields.get("content")
    }

    /// Every field but `id`, as given.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// S56's digest of `source` and `content`: equal exactly when they are the same JSON values
    /// (objects whatever the key order, arrays element by element, numbers by mathematical
    /// value, strings code point by code point), up to a 128-bit hash collision. What the
    /// delivery memory keeps per held id. Other fields do not count.
    pub(crate) fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

/// Hashes the id and the fingerprint: equal messages have equal fields, hence equal
/// fingerprints, and walking the fields again would add nothing but time.
impl std::hash::Hash for Message {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
        self.fingerprint.hash(state);
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Message");
        s.field("id", &self.id);
        for (key, value) in &self.fields {
            s.field(key, value);
        }
        s.finish()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len() + 1))?;
        map.serialize_entry("id", &self.id)?;
        for (key, value) in &self.fields {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MessageVisitor;

        impl<'de> Visitor<'de> for MessageVisitor {
            type Value = Message;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message object with a string `id`")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Message, A::Error> {
                let mut id = None;
                let mut fields = Map::new();
                while let Some(key) = access.next_key::<String>()? {
                    if key == "id" {
                        if id.is_some() {
                            return Err(de::Error::duplicate_field("id"));
                        }
                        id = Some(access.next_value::<MessageId>()?);
                    } else {
                        let value = access.next_value::<Value>()?;
                        fields.insert(key, value);
                    }
                }
                let id = id.ok_or_else(|| de::Error::missing_field("id"))?;
                Ok(Message::with(id, fields))
            }
        }

        deserializer.deserialize_map(MessageVisitor)
    }
}

/// Inline capacity of a [`Batch`]: a claim of up to this many messages does not allocate
/// ([example](Batch#examples)).
pub const BATCH_INLINE: usize = 4;

/// An ordered batch of shared messages: a claimed batch (S28) or the messages a step enters
/// (S29). Small batches live inline, so the common claim does not allocate. The host can hand the
/// batch of a `preStep` request straight back as its `enter` answer.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Batch, Message, BATCH_INLINE};
///
/// let mut batch = Batch::new();
/// for i in 0..BATCH_INLINE {
///     batch.push(Message::user(format!("m{i}"), "hi").into());
/// }
/// assert!(!batch.spilled()); // up to BATCH_INLINE messages stay inline
/// batch.push(Message::user("one-more", "hi").into());
/// assert!(batch.spilled());
/// assert_eq!(batch.as_slice()[0].id().as_str(), "m0");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Batch(SmallVec<[SharedMessage; BATCH_INLINE]>);

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch(SmallVec::new())
    }

    /// Appends a message.
    pub fn push(&mut self, message: SharedMessage) {
        self.0.push(message);
    }

    /// The messages in order.
    pub fn as_slice(&self) -> &[SharedMessage] {
        &self.0
    }

    /// Whether the batch outgrew its inline storage and allocated.
    pub fn spilled(&self) -> bool {
        self.0.spilled()
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl std::ops::Deref for Batch {
    type Target = [SharedMessage];

    fn deref(&self) -> &[SharedMessage] {
        &self.0
    }
}

impl FromIterator<SharedMessage> for Batch {
    fn from_iter<I: IntoIterator<Item = SharedMessage>>(iter: I) -> Self {
        Batch(iter.into_iter().collect())
    }
}

impl FromIterator<Message> for Batch {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Batch(iter.into_iter().map(Arc::new).collect())
    }
}

impl From<Vec<SharedMessage>> for Batch {
    fn from(messages: Vec<SharedMessage>) -> Self {
        Batch(SmallVec::from_vec(messages))
    }
}

impl IntoIterator for Batch {
    type Item = SharedMessage;
    type IntoIter = smallvec::IntoIter<[SharedMessage; BATCH_INLINE]>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Batch {
    type Item = &'a SharedMessage;
    type IntoIter = std::slice::Iter<'a, SharedMessage>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl Serialize for Batch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        SmallVec::deserialize(deserializer).map(Batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn s56_fingerprints_compare_source_and_content_as_json_values() {
        let m = |source: Value, content: Value| Message::new("a", source, content);
        let user = || json!({"kind": "user"});
        let same = |a: &Message, b: &Message| a.fingerprint() == b.fingerprint();
        assert!(same(&m(user(), json!(1)), &m(user(), json!(1.0))));
        assert!(same(&m(user(), json!(-0.0)), &m(user(), json!(0))));
        assert!(same(
            &m(user(), json!({"a": [1, {"b": null}], "c": "x"})),
            &m(user(), json!({"c": "x", "a": [1.0, {"b": null}]}))
        ));
        assert!(same(
            &m(user(), json!(u64::MAX)),
            &m(user(), json!(u64::MAX))
        ));
        assert!(same(
            &m(user(), json!(i64::MIN)),
            &m(user(), json!(-9.223_372_036_854_776e18))
        ));
        // Not the same: an integer beyond 2^53 and the nearest float, u64::MAX and -1, 2^64.
        assert!(!same(
            &m(user(), json!(9_007_199_254_740_993_u64)),
            &m(user(), json!(9_007_199_254_740_992.0))
        ));
        assert!(!same(&m(user(), json!(u64::MAX)), &m(user(), json!(-1))));
        assert!(!same(
            &m(user(), json!(u64::MAX)),
            &m(user(), json!(18_446_744_073_709_551_616.0))
        ));
        assert!(!same(&m(user(), json!(1)), &m(user(), json!(1.5))));
        assert!(!same(&m(user(), json!(1)), &m(user(), json!("1"))));
        assert!(!same(&m(user(), json!(1)), &m(user(), json!(true))));
        assert!(!same(&m(user(), json!([1, 2])), &m(user(), json!([2, 1]))));
        assert!(!same(
            &m(user(), json!({"a": 1})),
            &m(user(), json!({"a": 1, "b": null}))
        ));
        assert!(!same(&m(user(), json!("é")), &m(user(), json!("e\u{301}"))));
        assert!(!same(
            &m(user(), json!(1)),
            &m(json!({"kind": "plugin"}), json!(1))
        ));
        // Only source and content count (S56); other fields ride along.
        let mut fields = Map::new();
        fields.insert("source".into(), user());
        fields.insert("content".into(), json!(1));
        fields.insert("meta".into(), json!({"at": 5}));
        assert!(same(
            &Message::from_fields("a", fields),
            &m(user(), json!(1))
        ));
        let bare = Message::from_fields("a", Map::new());
        assert!(same(&bare, &Message::from_fields("a", Map::new())));
        assert!(!same(&bare, &m(user(), json!(1))));
    }

    #[test]
    fn a_message_round_trips_through_a_length_prefixed_format() {
        // CBOR writes the map's length before its entries, so the size hint must be exact.
        let wire = json!({"id": "a", "source": {"kind": "user"}, "content": "hi", "extra": [1]});
        let message: Message = serde_json::from_value(wire).unwrap();
        let mut bytes = Vec::new();
        ciborium::into_writer(&message, &mut bytes).unwrap();
        let back: Message = ciborium::from_reader(bytes.as_slice()).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn ids_borrow_as_their_text_and_debug_like_strings() {
        let ids: std::collections::HashSet<MessageId> = ["a", "b"].map(MessageId::from).into();
        assert!(ids.contains("a") && ids.contains("b") && !ids.contains("c"));
        assert_eq!(format!("{:?}", MessageId::from("a\"b")), r#""a\"b""#);
    }

    #[test]
    fn fields_and_debug_show_every_field_but_the_id_once() {
        let wire = json!({"id": "a", "source": {"kind": "user"}, "content": "hi"});
        let message: Message = serde_json::from_value(wire).unwrap();
        let keys: Vec<&str> = message.fields().keys().map(String::as_str).collect();
        assert_eq!(keys, ["content", "source"]);
        assert_eq!(
            format!("{message:?}"),
            r#"Message { id: "a", content: String("hi"), source: Object {"kind": String("user")} }"#
        );
    }

    #[test]
    fn a_non_object_message_is_rejected_with_what_was_expected() {
        let error = serde_json::from_value::<Message>(json!(1)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid type: integer `1`, expected a message object with a string `id`"
        );
    }

    #[test]
    fn batches_keep_their_messages_in_order_however_built() {
        let shared: Vec<SharedMessage> = ["a", "b"]
            .map(|id| Arc::new(Message::user(id, "hi")))
            .into();
        let ids = |batch: &Batch| -> Vec<String> {
            batch
                .as_slice()
                .iter()
                .map(|m| m.id().to_string())
                .collect()
        };
        let from_vec = Batch::from(shared.clone());
        let from_messages: Batch = ["a", "b"]
            .map(|id| Message::user(id, "hi"))
            .into_iter()
            .collect();
        let from_shared: Batch = shared.into_iter().collect();
        for batch in [&from_vec, &from_messages, &from_shared] {
            assert_eq!(ids(batch), ["a", "b"]);
        }
        assert_eq!(
            format!("{from_vec:?}"),
            r#"[Message { id: "a", content: String("hi"), source: Object {"kind": String("user")} }, Message { id: "b", content: String("hi"), source: Object {"kind": String("user")} }]"#
        );
        // Inline up to BATCH_INLINE messages; one more spills to the heap.
        let mut batch = Batch::new();
        for i in 0..BATCH_INLINE {
            batch.push(Arc::new(Message::user(format!("m{i}"), "hi")));
        }
        assert!(!batch.spilled());
        batch.push(Arc::new(Message::user("more", "hi")));
        assert!(batch.spilled());
        assert_eq!(batch.as_slice().len(), BATCH_INLINE + 1);
    }

    #[test]
    fn s6_message_round_trips_verbatim() {
        let wire = json!({"id": "a", "source": {"kind": "plugin", "name": "x"}, "content": [1, {"b": null}], "extra": true});
        let message: Message = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(message.id().as_str(), "a");
        assert_eq!(message.source_kind(), Some("plugin"));
        assert_eq!(serde_json::to_value(&message).unwrap(), wire);
        assert_eq!(Message::from_json(&wire), Some(message));
    }

    #[test]
    fn s6_message_needs_a_string_id() {
        assert!(serde_json::from_value::<Message>(json!({"source": {}})).is_err());
        assert!(serde_json::from_value::<Message>(json!({"id": 1})).is_err());
        assert!(serde_json::from_value::<Message>(json!("a")).is_err());
        assert_eq!(Message::from_json(&json!({"id": 1})), None);
    }

    #[test]
    fn s7_user_message_shape() {
        let message = Message::user("a", "hi");
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"id": "a", "source": {"kind": "user"}, "content": "hi"})
        );
        assert_eq!(message.content(), Some(&json!("hi")));
    }
}
