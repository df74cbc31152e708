//! Filters and transforms over a verified event: [JMESPath](https://jmespath.org/specification.html)
//! expressions (the query language of `aws ... --query`), through the `jmespath` crate (the
//! JMESPath project's own Rust implementation).
//!
//! Every expression sees the event as one JSON object, its **envelope**:
//!
//! ```json
//! {"source": "stripe", "id": "evt_1", "type": "charge.refunded", "body": {...}}
//! ```
//!
//! `body` is the event's JSON document (the body itself, or the JSON a form body carries:
//! GitHub's `payload=`, Slack's interactivity) or, for a form body that carries none, the
//! form's fields as an object of strings (Twilio); `null` when the body is neither. `id` and
//! `type` are the values the ledger keys the event with; the headers a signature covers carry
//! nothing else (Standard Webhooks signs `webhook-id` and `webhook-timestamp`), so no header is
//! offered.
//!
//! - A **filter** ([`Filter`]) holds when its value is truthy in JMESPath's sense: anything but
//!   `false`, `null`, `""`, `[]` and `{}`. Example: `` type == 'charge.refunded' &&
//!   body.data.object.amount_refunded > `1000` ``.
//! - A **transform** ([`Transform`]) builds a new JSON value, for example
//!   `{id: id, charge: body.data.object.id, amount: body.data.object.amount_refunded}`. A transform
//!   whose value is `null` fails: it almost always means a path that matched nothing.
//!
//! **Bounded cost, no I/O.** JMESPath has no loops, recursion, variables or functions with side
//! effects: an expression walks the document it is given and nothing else, and its cost grows
//! with the document's size (bounded by the source's `max_body_bytes`) and the expression's
//! (bounded by [`MAX_EXPRESSION_CHARS`], and its nesting by [`MAX_OPENING_CHARS`] and
//! [`MAX_EXPRESSION_DEPTH`], so that neither the parser nor the evaluation can exhaust a
//! thread's stack). Only a flatten-and-pipe chain written to multiply
//! (`[@, @][] | [@, @][] | ...`) grows faster, and that is written by the operator in the
//! configuration, never by a sender. Errors name the expression and the position of the
//! failing part, never a value of the event.

use std::fmt;

use serde_json::Value;

/// Longest expression accepted, in characters.
pub const MAX_EXPRESSION_CHARS: usize = 2_000;

/// Most opening characters (`(`, `[`, `{`, `!`, `&`, `*`) an expression may hold: each can
/// open a level the parser recurses into (a group, a list, a hash, a filter, a negation, an
/// expression reference, a projection), so this bounds the parser's stack (at most 200 levels
/// deep). Counted anywhere in the text, literals included: a conservative bound that no
/// expression written for a filter or transform comes near.
pub const MAX_OPENING_CHARS: usize = 200;

/// Deepest syntax tree accepted (a field, a function call, `!`, a projection, each `.` of a
/// path: one level each): evaluating an expression, and dropping it, recurse once per level,
/// so this bounds their stack. A path of 60 fields, or 30 nested functions, still fits.
pub const MAX_EXPRESSION_DEPTH: usize = 64;

/// Largest array index, slice start, stop or step (in magnitude) an expression may hold: the
/// `jmespath` crate steps a slice with `i += step` in `i32` and negates a negative index, so a
/// step near `i32::MAX` overflows (a panic: in a release build an index out of bounds) and so
/// does the index `i32::MIN`. No array an event holds comes near this bound.
pub const MAX_INDEX: i32 = 1 << 24;

/// Why an expression was refused or failed. Carries no value of the event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpressionError {
    /// The expression does not parse, or is too long.
    #[error("expression {expression:?} is invalid: {reason}")]
    Invalid {
        /// The expression as written.
        expression: String,
        /// What is wrong and where (column, 0-based).
        reason: String,
    },
    /// Evaluating the expression failed for this event (a function given the wrong type, for
    /// example `length` of a number).
    #[error("expression {expression:?} failed: {reason}")]
    Failed {
        /// The expression as written.
        expression: String,
        /// What failed and where (column, 0-based).
        reason: String,
    },
    /// A transform's value was `null` (usually: a path that matched nothing).
    #[error("expression {expression:?} gave null (a path that matched nothing?)")]
    Null {
        /// The expression as written.
        expression: String,
    },
}

/// A compiled JMESPath expression and its text.
pub struct Expression {
    compiled: jmespath::Expression<'static>,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expression")
            .field(&self.compiled.as_str())
            .finish()
    }
}

impl Clone for Expression {
    fn clone(&self) -> Self {
        Self {
            compiled: self.compiled.clone(),
        }
    }
}

impl Expression {
    /// Compiles `text`.
    ///
    /// # Errors
    /// [`ExpressionError::Invalid`] when it is empty, longer than [`MAX_EXPRESSION_CHARS`] or
    /// does not parse (the reason gives the column).
    pub fn compile(text: &str) -> Result<Self, ExpressionError> {
        let invalid = |reason: String| ExpressionError::Invalid {
            expression: text.to_owned(),
            reason,
        };
        if text.trim().is_empty() {
            return Err(invalid("it is empty".to_owned()));
        }
        if text.chars().count() > MAX_EXPRESSION_CHARS {
            return Err(invalid(format!(
                "it is longer than {MAX_EXPRESSION_CHARS} characters"
            )));
        }
        let opening = text
            .bytes()
            .filter(|b| matches!(b, b'(' | b'[' | b'{' | b'!' | b'&' | b'*'))
            .count();
        if opening > MAX_OPENING_CHARS {
            return Err(invalid(format!(
                "it holds more than {MAX_OPENING_CHARS} of ( [ {{ ! & *"
            )));
        }
        let compiled = jmespath::compile(text).map_err(|error| invalid(reason_of(&error)))?;
        let (deepest, largest) = depth(compiled.as_ast());
        if deepest > MAX_EXPRESSION_DEPTH {
            return Err(invalid(format!(
                "it nests deeper than {MAX_EXPRESSION_DEPTH} levels"
            )));
        }
        if largest > MAX_INDEX.unsigned_abs() {
            return Err(invalid(format!(
                "an index or slice number is larger than {MAX_INDEX} in magnitude"
            )));
        }
        Ok(Self { compiled })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        self.compiled.as_str()
    }

    /// Evaluates the expression on `input` (any JSON value).
    ///
    /// # Errors
    /// [`ExpressionError::Failed`] when evaluation fails.
    pub fn evaluate(&self, input: &Value) -> Result<Value, ExpressionError> {
        let failed = |error: jmespath::JmespathError| ExpressionError::Failed {
            expression: self.as_str().to_owned(),
            reason: reason_of(&error),
        };
        let result = self.compiled.search(input).map_err(failed)?;
        serde_json::to_value(&*result).map_err(|_| ExpressionError::Failed {
            expression: self.as_str().to_owned(),
            reason: "its value is not JSON".to_owned(),
        })
    }

    /// Whether the value on `input` is truthy (JMESPath: not `false`, `null`, `""`, `[]` or
    /// `{}`).
    ///
    /// # Errors
    /// [`ExpressionError::Failed`] when evaluation fails.
    pub fn holds(&self, input: &Value) -> Result<bool, ExpressionError> {
        let result = self
            .compiled
            .search(input)
            .map_err(|error| ExpressionError::Failed {
                expression: self.as_str().to_owned(),
                reason: reason_of(&error),
            })?;
        Ok(result.is_truthy())
    }
}

/// The depth of `ast` (a leaf is 1) and the largest magnitude of its array indices and slice
/// numbers, walked without recursion.
fn depth(ast: &jmespath::ast::Ast) -> (usize, u32) {
    use jmespath::ast::Ast;
    let mut deepest = 0;
    let mut largest = 0u32;
    let mut stack = vec![(ast, 1usize)];
    while let Some((node, level)) = stack.pop() {
        deepest = deepest.max(level);
        let next = level + 1;
        match node {
            Ast::Comparison { lhs, rhs, .. }
            | Ast::Projection { lhs, rhs, .. }
            | Ast::And { lhs, rhs, .. }
            | Ast::Or { lhs, rhs, .. }
            | Ast::Subexpr { lhs, rhs, .. } => {
                stack.push((lhs, next));
                stack.push((rhs, next));
            }
            Ast::Condition {
                predicate, then, ..
            } => {
                stack.push((predicate, next));
                stack.push((then, next));
            }
            Ast::Expref { ast: node, .. }
            | Ast::Flatten { node, .. }
            | Ast::Not { node, .. }
            | Ast::ObjectValues { node, .. } => stack.push((node, next)),
            Ast::Function { args, .. } => stack.extend(args.iter().map(|a| (a, next))),
            Ast::MultiList { elements, .. } => stack.extend(elements.iter().map(|a| (a, next))),
            Ast::MultiHash { elements, .. } => {
                stack.extend(elements.iter().map(|kv| (&kv.value, next)));
            }
            Ast::Index { idx, .. } => largest = largest.max(idx.unsigned_abs()),
            Ast::Slice {
                start, stop, step, ..
            } => {
                for n in [*start, *stop, Some(*step)].into_iter().flatten() {
                    largest = largest.max(n.unsigned_abs());
                }
            }
            Ast::Identity { .. } | Ast::Field { .. } | Ast::Literal { .. } => {}
        }
    }
    (deepest, largest)
}

/// The reason and column of a JMESPath error, without the expression text the crate's
/// `Display` appends (the caller names the expression once).
fn reason_of(error: &jmespath::JmespathError) -> String {
    let reason = error.reason.to_string();
    let reason = reason.lines().next().unwrap_or_default();
    format!("{reason} (column {})", error.column)
}

/// The envelope every expression sees (see the module docs): `{"source", "id", "type",
/// "body"}`, `body` from [`body_value`].
pub fn envelope(source: &str, event_id: &str, event_type: &str, body: Value) -> Value {
    serde_json::json!({
        "source": source,
        "id": event_id,
        "type": event_type,
        "body": body,
    })
}

/// The `body` of the envelope for an event with raw body `body` and JSON document `document`
/// (the body itself, or the JSON a form carries): the document parsed; for a form body whose
/// document is not JSON, its fields as an object of strings (a repeated field keeps its last
/// value); `null` otherwise.
pub fn body_value(body: &[u8], document: &[u8]) -> Value {
    if let Ok(value) = serde_json::from_slice::<Value>(document) {
        return value;
    }
    if body == document && looks_like_form(body) {
        let fields: serde_json::Map<String, Value> = form_urlencoded::parse(body)
            .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
            .collect();
        return Value::Object(fields);
    }
    Value::Null
}

/// Whether `body` reads as `application/x-www-form-urlencoded` fields (`k=v&...`, no JSON).
fn looks_like_form(body: &[u8]) -> bool {
    !body.is_empty()
        && std::str::from_utf8(body).is_ok()
        && body.contains(&b'=')
        && !body.iter().any(|b| b.is_ascii_whitespace())
}

/// A condition over the event's envelope: whether a target or a handler applies.
#[derive(Debug, Clone)]
pub struct Filter(Expression);

impl Filter {
    /// Compiles a filter.
    ///
    /// # Errors
    /// [`ExpressionError::Invalid`], as [`Expression::compile`].
    pub fn compile(text: &str) -> Result<Self, ExpressionError> {
        Expression::compile(text).map(Self)
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether the filter holds for `envelope` (see [`envelope`]).
    ///
    /// # Errors
    /// [`ExpressionError::Failed`] when evaluation fails.
    pub fn matches(&self, envelope: &Value) -> Result<bool, ExpressionError> {
        self.0.holds(envelope)
    }
}

/// A reshaping of the event's envelope into a new JSON message body.
#[derive(Debug, Clone)]
pub struct Transform(Expression);

impl Transform {
    /// Compiles a transform.
    ///
    /// # Errors
    /// [`ExpressionError::Invalid`], as [`Expression::compile`].
    pub fn compile(text: &str) -> Result<Self, ExpressionError> {
        Expression::compile(text).map(Self)
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The new body for `envelope` (see [`envelope`]), serialised as JSON.
    ///
    /// # Errors
    /// [`ExpressionError::Failed`] when evaluation fails; [`ExpressionError::Null`] when its
    /// value is `null`.
    pub fn apply(&self, envelope: &Value) -> Result<Vec<u8>, ExpressionError> {
        let value = self.0.evaluate(envelope)?;
        if value.is_null() {
            return Err(ExpressionError::Null {
                expression: self.as_str().to_owned(),
            });
        }
        serde_json::to_vec(&value).map_err(|_| ExpressionError::Failed {
            expression: self.as_str().to_owned(),
            reason: "its value is not JSON".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refund(amount: i64) -> Value {
        envelope(
            "stripe",
            "evt_1",
            "charge.refunded",
            json!({"id": "evt_1", "data": {"object": {"id": "ch_1", "amount_refunded": amount}}}),
        )
    }

    #[test]
    fn a_filter_is_truthiness_over_the_envelope() {
        let big = Filter::compile(
            "type == 'charge.refunded' && body.data.object.amount_refunded > `1000`",
        )
        .unwrap();
        assert!(big.matches(&refund(5000)).unwrap());
        assert!(!big.matches(&refund(500)).unwrap());
        // A path that matches nothing is null: falsy, not an error.
        let missing = Filter::compile("body.nope.deeper").unwrap();
        assert!(!missing.matches(&refund(1)).unwrap());
        assert!(Filter::compile("source")
            .unwrap()
            .matches(&refund(1))
            .unwrap());
    }

    #[test]
    fn a_transform_reshapes_and_null_is_a_failure() {
        let t = Transform::compile("{event: id, charge: body.data.object.id}").unwrap();
        let out: Value = serde_json::from_slice(&t.apply(&refund(7)).unwrap()).unwrap();
        assert_eq!(out, json!({"event": "evt_1", "charge": "ch_1"}));
        let null = Transform::compile("body.nope").unwrap();
        let e = null.apply(&refund(7)).unwrap_err();
        assert!(matches!(e, ExpressionError::Null { .. }), "{e}");
    }

    #[test]
    fn errors_name_the_expression_and_column_never_a_value() {
        let e = Filter::compile("body.[?").unwrap_err().to_string();
        assert!(e.contains("body.[?") && e.contains("column"), "{e}");
        assert!(Filter::compile(" ").is_err());
        assert!(Filter::compile(&"a.".repeat(MAX_EXPRESSION_CHARS)).is_err());
        let e = Transform::compile("length(body.data.object.amount_refunded)")
            .unwrap()
            .apply(&refund(424_242))
            .unwrap_err()
            .to_string();
        assert!(e.contains("failed") && e.contains("column"), "{e}");
        assert!(!e.contains("424242"), "{e}");
    }

    /// Run on a thread with a 2 MiB stack (tokio's workers' and the test threads' default),
    /// in a debug build: what start-up or an event's evaluation would run on.
    fn on_a_small_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .expect("no stack overflow, no panic");
    }

    #[test]
    fn deeply_nested_expressions_are_refused_before_they_can_exhaust_the_stack() {
        on_a_small_stack(|| {
            let event = json!({"a": {"a": 1}});
            // Too many opening characters: refused before the parser runs.
            for text in [
                format!("{}a{}", "(".repeat(900), ")".repeat(900)),
                format!("{}a", "!".repeat(1_000)),
                format!("a{}", "[*]".repeat(600)),
                format!("a{}", ".*".repeat(990)),
            ] {
                let e = Filter::compile(&text).unwrap_err().to_string();
                assert!(e.contains("more than 200"), "{}", &e[e.len() - 60..]);
            }
            // Parsed, then refused for its depth (a path of 990 fields is 990 levels deep).
            for text in [
                format!("{}a", "!".repeat(150)),
                format!("a{}", ".a".repeat(990)),
                format!("a{}", "|a".repeat(990)),
                format!("a{}", "||a".repeat(660)),
                format!("a{}", "[0]".repeat(190)),
                format!("a{}", ".*".repeat(199)),
                format!("a{}", "[]".repeat(199)),
                format!("{}a{}", "abs(".repeat(199), ")".repeat(199)),
                format!("{}a{}", "{a:".repeat(199), "}".repeat(199)),
                format!("a{}", "==a".repeat(660)),
            ] {
                let Err(e) = Transform::compile(&text) else {
                    panic!("{} compiled", &text[..12]);
                };
                let e = e.to_string();
                assert!(e.contains("deeper than 64"), "{}", &e[e.len() - 60..]);
            }
            // Parentheses add no level: 190 of them parse on this stack and evaluate.
            let parens = format!("{}a{}", "(".repeat(190), ")".repeat(190));
            assert!(Filter::compile(&parens).unwrap().matches(&event).unwrap());
            // As deep as allowed: compiles and evaluates.
            let not =
                Filter::compile(&format!("{}a", "!".repeat(MAX_EXPRESSION_DEPTH - 1))).unwrap();
            assert!(!not.matches(&event).unwrap());
            let path =
                Transform::compile(&format!("a{}", ".a".repeat(MAX_EXPRESSION_DEPTH - 2))).unwrap();
            assert!(
                path.apply(&event).is_err(),
                "null: a path that matched nothing"
            );
            for text in [
                format!("{}`1`{}", "abs(".repeat(63), ")".repeat(63)),
                format!("{}a{}", "{a:".repeat(63), "}".repeat(63)),
                format!("{}a{}", "[".repeat(63), "]".repeat(63)),
                format!("a{}", "[*]".repeat(62)),
                format!("a{}", ".*".repeat(62)),
                format!("a{}", "[?a]".repeat(31)),
            ] {
                let t = Transform::compile(&text).unwrap_or_else(|e| panic!("{e}"));
                let _ = t.apply(&event);
            }
        });
    }

    /// jmespath 0.5 steps a slice with `i += step` in `i32` and negates an index with `-idx`:
    /// a step near `i32::MAX` overflows (a panic in a debug build, an out-of-bounds index and
    /// so a panic in a release build), as does the index `i32::MIN`. A panic in the receiver
    /// fails every delivery of the event (the provider retries it forever).
    #[test]
    fn huge_slice_steps_and_indices_are_refused_or_evaluate_without_a_panic() {
        let event = json!({"a": [1, 2, 3]});
        for text in [
            "a[1::2147483647]",
            "a[::2147483647]",
            "a[-2147483648]",
            "a[2147483647]",
            "a[-2147483648:2147483647:2147483647]",
        ] {
            let outcome = std::panic::catch_unwind(|| {
                let _ = Filter::compile(text).map(|f| f.matches(&event));
                let _ = Transform::compile(text).map(|t| t.apply(&event));
            });
            assert!(outcome.is_ok(), "{text} panicked");
        }
        // Ordinary slices and indices still work.
        let t = Transform::compile("[a[-1], a[::-2]]").unwrap();
        assert_eq!(t.apply(&event).unwrap(), b"[3,[3,1]]");
    }

    #[test]
    fn the_body_is_the_document_or_the_forms_fields_or_null() {
        assert_eq!(body_value(b"{\"a\":1}", b"{\"a\":1}"), json!({"a": 1}));
        // GitHub's payload= form: the document is the JSON it carries.
        assert_eq!(body_value(b"payload=%7B%7D", b"{}"), json!({}));
        // Twilio: a form without JSON.
        assert_eq!(
            body_value(
                b"CallSid=CA1&CallStatus=completed",
                b"CallSid=CA1&CallStatus=completed"
            ),
            json!({"CallSid": "CA1", "CallStatus": "completed"})
        );
        assert_eq!(body_value(b"not json", b"not json"), Value::Null);
    }
}
