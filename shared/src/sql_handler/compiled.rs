//! A configured SQL handler made ready to run. `crate::config::sql_handlers` checked what needs
//! neither the SQL lexer nor the database; here each statement's `$n` count is checked against
//! its `params` with the ledger's lexer and its kind against what a handler may run (reads and
//! writes only), it is interned as `&'static Sql` ([`super::intern`]), the `returning`
//! statement is wrapped to read its row as JSON, and whether the handler rides in the claim's
//! one statement is decided.

use serde_json::Value;

use super::intern::intern;
use crate::config::sql_handlers::{Order, Param, SqlHandlerConfig, SqlHandlerError};
use crate::config::targets::EventTypes;
use crate::db::Sql;
use crate::effect::{HandlerError, Success};
use crate::expression::Filter;

/// One statement, ready to send.
#[derive(Debug)]
pub struct Statement {
    /// Its number in the handler's `"sql"`, from 1.
    pub number: usize,
    /// The statement with its declared parameter types.
    pub sql: &'static Sql,
    /// The parameters, `$1` first.
    pub params: Vec<Param>,
}

/// One SQL handler, ready to run.
#[derive(Debug)]
pub struct SqlHandler {
    /// Its number in the source's `"handlers"`, from 1.
    pub number: usize,
    /// Its patterns as errors name them: `event_types "a", "b.*"`.
    pub patterns: String,
    /// The event types it applies to.
    pub event_types: EventTypes,
    /// The condition, if any.
    pub when: Option<Filter>,
    /// The statements, in order.
    pub statements: Vec<Statement>,
    /// The ordering guard, if any.
    pub order: Option<Order>,
    /// The response status.
    pub status: Success,
    /// The fixed body (and the body when the `returning` statement returned no row).
    pub body: Value,
    /// The statement whose first row is the body, with the statement that reads it
    /// (`WITH r AS (<statement>) SELECT to_jsonb(r) FROM r LIMIT 1`).
    pub returning: Option<(usize, &'static Sql)>,
    /// Whether it can ride in the claim's one statement (`crate::ledger::one_statement`): no
    /// `order`, no `returning`, and every statement one `INSERT ... VALUES` row.
    pub one_statement: bool,
}

impl SqlHandler {
    /// Every statement as it is sent (the `returning` one wrapped), with its number: what is
    /// prepared against the schema.
    pub fn sent_statements(&self) -> impl Iterator<Item = (usize, &'static Sql)> + '_ {
        self.statements.iter().map(|s| match self.returning {
            Some((n, wrapped)) if n == s.number => (s.number, wrapped),
            _ => (s.number, s.sql),
        })
    }

    /// `config` made ready to run.
    ///
    /// # Errors
    /// [`SqlHandlerError`] naming the statement when its text does not scan (an unterminated
    /// string, quoted identifier or comment, unbalanced parentheses, `$0`), its highest `$n`
    /// differs from its `params`' count, or it is not a read or a write (transaction control,
    /// `SET`, DDL: `crate::ledger::Tx`'s rule).
    pub fn build(config: &SqlHandlerConfig) -> Result<Self, SqlHandlerError> {
        let mut statements = Vec::with_capacity(config.statements.len());
        for statement in &config.statements {
            let refused = |problem: String| config.error(Some(statement.number), problem);
            let highest = crate::ledger::highest_parameter(&statement.text).ok_or_else(|| {
                refused(
                    "the statement does not scan (an unterminated string, quoted identifier or \
                     comment, unbalanced parentheses, or $0)"
                        .to_owned(),
                )
            })?;
            if highest != statement.params.len() {
                return Err(refused(format!(
                    "the statement uses parameters up to ${highest} but params lists {}",
                    statement.params.len()
                )));
            }
            let sql = intern(&statement.text, &statement.types());
            crate::ledger::tx::check_statement(sql).map_err(|e| {
                refused(match e {
                    HandlerError::Fatal { reason, .. } | HandlerError::Retryable { reason, .. } => {
                        reason
                    }
                })
            })?;
            // A Rust handler may run SET LOCAL; a SQL handler runs reads and writes only.
            if crate::ledger::tx::leading_words(sql.text)
                .0
                .eq_ignore_ascii_case("SET")
            {
                return Err(refused(
                    "a SQL handler may not run SET statements (SET LOCAL included): only reads \
                     and writes"
                        .to_owned(),
                ));
            }
            statements.push(Statement {
                number: statement.number,
                sql,
                params: statement.params.clone(),
            });
        }
        let returning = config.response.returning.and_then(|n| {
            statements
                .iter()
                .find(|s| s.number == n)
                .map(|s| (n, returning_sql(s.sql)))
        });
        let one_statement = config.order.is_none()
            && returning.is_none()
            && statements
                .iter()
                .all(|s| crate::ledger::gate(s.sql.text, s.sql.types.len(), 0).is_some());
        let status = match config.response.status {
            201 => Success::Created,
            202 => Success::Accepted,
            // The configuration allows 200, 201 and 202 only.
            _ => Success::Ok,
        };
        Ok(Self {
            number: config.number,
            patterns: config.patterns(),
            event_types: config.event_types.clone(),
            when: config.when.clone(),
            statements,
            order: config.order.clone(),
            status,
            body: config.response.body.clone(),
            returning,
            one_statement,
        })
    }
}

/// The statement that reads the first row `sql`'s `RETURNING` gives, as one JSON object.
fn returning_sql(sql: &'static Sql) -> &'static Sql {
    let text = sql.text.trim_end().trim_end_matches(';').trim_end();
    intern(
        &format!("WITH r AS (\n{text}\n)\nSELECT to_jsonb(r) FROM r LIMIT 1"),
        sql.types,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sources;

    /// Source `pay`'s handlers built from `handlers` (a JSON list), or the error as printed.
    fn built(handlers: &str) -> Result<Vec<SqlHandler>, String> {
        let json = format!(
            r#"[{{"name": "pay", "scheme": "stripe", "secrets": ["x"], "handlers": {handlers}}}]"#
        );
        let sources = Sources::from_json(&json).map_err(|e| e.to_string())?;
        sources
            .get("pay")
            .unwrap()
            .sql_handlers
            .iter()
            .map(SqlHandler::build)
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())
    }

    fn one(statement: &str, params: &str, extra: &str) -> String {
        format!(
            r#"[{{"event_types": ["t"], "sql": [{{"statement": {statement:?}, "params": {params}}}]{extra}}}]"#
        )
    }

    #[test]
    fn shapes_statuses_and_the_returning_statement() {
        let plain = &built(&one(
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING",
            r#"[{"event": "id"}]"#,
            r#", "response": {"status": 202}"#,
        ))
        .unwrap()[0];
        assert!(plain.one_statement);
        assert_eq!(plain.status, Success::Accepted);
        let update = &built(&one("UPDATE t SET a = $1", r#"[{"event": "id"}]"#, "")).unwrap()[0];
        assert!(
            !update.one_statement,
            "only INSERT rows ride in the one statement"
        );
        let returning = &built(&one(
            "INSERT INTO t (a) VALUES ($1) RETURNING a;",
            r#"[{"event": "id"}]"#,
            r#", "response": {"returning": 1}"#,
        ))
        .unwrap()[0];
        assert!(!returning.one_statement);
        let (n, wrapped) = returning.returning.unwrap();
        assert_eq!(n, 1);
        assert_eq!(wrapped.text, "WITH r AS (\nINSERT INTO t (a) VALUES ($1) RETURNING a\n)\nSELECT to_jsonb(r) FROM r LIMIT 1");
        assert_eq!(
            returning.sent_statements().next().unwrap().1.text,
            wrapped.text
        );
        let ordered = &built(&one(
            "INSERT INTO t (a) VALUES ($1)",
            r#"[{"event": "id"}]"#,
            r#", "order": {"entity_type": "c", "entity": "/id", "version": "/v"}"#,
        ))
        .unwrap()[0];
        assert!(!ordered.one_statement, "the guard reads first");
    }

    #[test]
    fn building_the_same_configuration_again_reuses_the_same_statements() {
        let handlers = one("INSERT INTO t (a) VALUES ($1)", r#"[{"event": "id"}]"#, "");
        let a = built(&handlers).unwrap();
        let b = built(&handlers).unwrap();
        assert!(std::ptr::eq(a[0].statements[0].sql, b[0].statements[0].sql));
    }

    #[test]
    fn lexer_errors_name_the_handler_and_the_statement() {
        let e = built(&one(
            "INSERT INTO t (a) VALUES ($1, $2)",
            r#"[{"path": "/a", "type": "text"}]"#,
            "",
        ))
        .unwrap_err();
        assert!(
            e.contains("SQL handler #1 (event_types \"t\"), statement 1")
                && e.contains("up to $2")
                && e.contains("lists 1"),
            "{e}"
        );
        let e = built(&one("COMMIT", "[]", "")).unwrap_err();
        assert!(e.contains("statement 1") && e.contains("COMMIT"), "{e}");
        // The reference refuses SET: SET LOCAL too (it would lift the event transaction's own
        // limits, statement_timeout and lock_timeout, for the ledger's completion after it).
        for set in [
            "SET LOCAL statement_timeout = 0",
            "/* x */ set local lock_timeout TO 0",
        ] {
            let e = built(&one(set, "[]", "")).unwrap_err();
            assert!(e.contains("statement 1") && e.contains("SET"), "{e}");
        }
        let e = built(&one("INSERT INTO t (a) VALUES ('x)", "[]", "")).unwrap_err();
        assert!(e.contains("does not scan"), "{e}");
        let e = built(&one("SELECT '$1', $2", r#"[{"event": "id"}]"#, "")).unwrap_err();
        assert!(
            e.contains("up to $2 but params lists 1"),
            "a $n in a string is not a parameter: {e}"
        );
    }
}
