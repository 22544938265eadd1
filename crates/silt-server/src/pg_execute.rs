//! The extended protocol's `Bind` and `Execute`: a portal's rows streamed
//! to the socket, and the replies held until `Sync` (or `Flush`).
//!
//! **Replies held.** `pgwire`'s defaults `send` `BindComplete`,
//! `CommandComplete` and `PortalSuspended`: each a flush of the socket, a
//! segment of its own, and a wake-up of the client's reader. A prepared
//! statement's `Bind`/`Execute`/`Sync` so cost three writes where a simple
//! query costs one. PostgreSQL writes nothing until `Sync` or `Flush`
//! asks for it (or its buffer fills), and neither do these: they `feed`,
//! and `on_sync` (`ReadyForQuery`) or `on_flush` flushes.
//!
//! `pgwire` 0.42.1's default `on_execute` starts the portal and then takes
//! its rows with `Portal::fetch(max_rows)`, which collects them into a
//! `Vec<DataRow>` before the first is sent; `max_rows` is 0 (all rows) for
//! nearly every client. A result of 10^6 rows was so held whole, encoded,
//! in the server (~115 MiB per statement of two `bigint` columns; 8 such
//! statements at once took `server-abuse` past 1 GiB), outside the memory
//! pool and past `--max-result-bytes`, which counts the Arrow batches as
//! they are pulled. Here the rows go from the statement's stream into the
//! connection's sink one by one (the sink flushes at its backpressure
//! boundary), at most `max_rows` of them; a portal with rows left is put
//! back suspended with the rest of its stream, as PostgreSQL's is.
//!
//! `Describe` is answered the same way ([`describe`]): psycopg sends
//! `Bind`/`Describe`/`Execute`/`Sync` for each prepared execution, and a
//! flushed `RowDescription` reached it as a segment of its own, ahead of
//! the rows: one more wake-up of the client per statement.
//!
//! Everything else follows `pgwire`'s default step for step: the state
//! checks, the cancel receiver, the responses that are not rows, and
//! `PortalSuspended` / `CommandComplete`.

use std::fmt::Debug;
use std::sync::Arc;

use futures::future::{Either, select};
use futures::{Sink, SinkExt, StreamExt};
use pgwire::api::copy::{send_copy_both_response, send_copy_in_response, send_copy_out_response};
use pgwire::api::portal::PortalExecutionState;
use pgwire::api::query::{ExtendedQueryHandler, send_execution_response};
use pgwire::api::results::{
    DescribePortalResponse, DescribeResponse, DescribeStatementResponse, QueryResponse, Response,
    Tag,
};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionHandle, DEFAULT_NAME};
use pgwire::api::{PgWireConnectionState, portal::Portal};
use pgwire::error::ErrorInfo;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{Bind, BindComplete, Describe, Execute, PortalSuspended};
use pgwire::messages::response::EmptyQueryResponse;

/// Answer `Bind`: the portal made as `pgwire`'s default makes it, its
/// `BindComplete` held (see the module doc).
pub(crate) async fn bind<S, C>(client: &mut C, message: Bind) -> PgWireResult<()>
where
    S: Clone,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = S>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
    let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
    match client.portal_store().get_statement(statement_name) {
        Some(Entry::Value(statement)) => {
            let portal = Portal::try_new(&message, statement)?;
            client.portal_store().put_portal(Arc::new(portal));
        }
        Some(Entry::Empty) => {
            if !message.parameters.is_empty() {
                return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "ERROR".to_owned(),
                    "08P01".to_owned(),
                    format!(
                        "bind message supplies {} parameters, but prepared statement {statement_name:?} requires 0",
                        message.parameters.len()
                    ),
                ))));
            }
            client.portal_store().put_empty_portal(portal_name);
        }
        None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
    }
    client
        .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
        .await?;
    Ok(())
}

/// Answer `Execute` for `handler`, streaming the portal's rows.
pub(crate) async fn execute<H, C>(handler: &H, client: &mut C, message: Execute) -> PgWireResult<()>
where
    H: ExtendedQueryHandler + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
        return Err(PgWireError::NotReadyForQuery);
    }
    let mut transaction_status = client.transaction_status();
    client.set_state(PgWireConnectionState::QueryInProgress);
    let portal_name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    let max_rows = message.max_rows.max(0) as usize;
    let portal = match client.portal_store().get_portal(portal_name) {
        Some(Entry::Value(portal)) => portal,
        Some(Entry::Empty) => {
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
            client.set_state(PgWireConnectionState::ReadyForQuery);
            return Ok(());
        }
        None => return Err(PgWireError::PortalNotFound(portal_name.to_owned())),
    };
    let initial = matches!(*portal.state().lock().await, PortalExecutionState::Initial);
    let rows = if initial {
        let resp = match cancel_receiver(client).await {
            Some(cancel) => match select(handler.do_query(client, &portal, max_rows), cancel).await
            {
                Either::Left((result, _)) => result,
                Either::Right(_) => Err(PgWireError::QueryCanceled),
            },
            None => handler.do_query(client, &portal, max_rows).await,
        }?;
        match resp {
            Response::Query(results) => Some(results),
            Response::EmptyQuery => {
                client
                    .feed(PgWireBackendMessage::EmptyQueryResponse(
                        EmptyQueryResponse::new(),
                    ))
                    .await?;
                None
            }
            Response::Execution(tag) => {
                send_execution_response(client, tag).await?;
                None
            }
            Response::TransactionStart(tag) => {
                send_execution_response(client, tag).await?;
                transaction_status = transaction_status.to_in_transaction_state();
                None
            }
            Response::TransactionEnd(tag) => {
                send_execution_response(client, tag).await?;
                transaction_status = transaction_status.to_idle_state();
                client.portal_store().rm_portal(DEFAULT_NAME);
                None
            }
            Response::Error(err) => {
                client
                    .send(PgWireBackendMessage::ErrorResponse((*err).into()))
                    .await?;
                transaction_status = transaction_status.to_error_state();
                None
            }
            Response::CopyIn(result) => {
                client.set_state(PgWireConnectionState::CopyInProgress(true));
                send_copy_in_response(client, result).await?;
                None
            }
            Response::CopyOut(result) => {
                send_copy_out_response(client, result).await?;
                None
            }
            Response::CopyBoth(result) => {
                client.set_state(PgWireConnectionState::CopyInProgress(true));
                send_copy_both_response(client, result).await?;
                None
            }
        }
    } else {
        // Suspended (or finished): take what is left.
        let state = portal.state();
        let mut state = state.lock().await;
        match std::mem::replace(&mut *state, PortalExecutionState::Finished) {
            PortalExecutionState::Suspended(results) => Some(results),
            _ => Some(QueryResponse::new(
                Arc::new(vec![]),
                futures::stream::empty(),
            )),
        }
    };
    if let Some(results) = rows {
        send_rows(client, &portal, results, max_rows).await?;
    }
    if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(transaction_status);
    }
    Ok(())
}

/// Send up to `max_rows` (0: all) of `results` as they come; with rows
/// left, `PortalSuspended` and the portal keeps the rest, else
/// `CommandComplete` and the portal is finished.
async fn send_rows<S: Clone, C>(
    client: &mut C,
    portal: &Portal<S>,
    mut results: QueryResponse,
    max_rows: usize,
) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    // Finished unless it suspends below: a row that fails ends it.
    *portal.state().lock().await = PortalExecutionState::Finished;
    let mut sent = 0usize;
    let mut suspended = false;
    loop {
        if max_rows != 0 && sent == max_rows {
            // PostgreSQL suspends a portal that gave `max_rows` rows even
            // if none is left; the next Execute then completes it.
            suspended = true;
            break;
        }
        match results.data_rows().next().await {
            Some(row) => {
                client.feed(PgWireBackendMessage::DataRow(row?)).await?;
                sent += 1;
            }
            None => break,
        }
    }
    if suspended {
        *portal.state().lock().await = PortalExecutionState::Suspended(results);
        client
            .feed(PgWireBackendMessage::PortalSuspended(PortalSuspended::new()))
            .await?;
    } else {
        let tag = Tag::new(results.command_tag()).with_rows(sent);
        client
            .feed(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
    }
    Ok(())
}

/// Answer `Describe` for `handler` as `pgwire`'s default does, with the
/// descriptions held until `Sync` or `Flush` (see the module doc).
pub(crate) async fn describe<H, C>(
    handler: &H,
    client: &mut C,
    message: Describe,
) -> PgWireResult<()>
where
    H: ExtendedQueryHandler + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    match message.target_type {
        b'S' => match client.portal_store().get_statement(name) {
            Some(Entry::Value(stmt)) => {
                let d = handler.do_describe_statement(client, &stmt).await?;
                feed_description(client, &d).await
            }
            Some(Entry::Empty) => {
                feed_description(client, &DescribeStatementResponse::no_data()).await
            }
            None => Err(PgWireError::StatementNotFound(name.to_owned())),
        },
        b'P' => match client.portal_store().get_portal(name) {
            Some(Entry::Value(portal)) => {
                let d = handler.do_describe_portal(client, &portal).await?;
                feed_description(client, &d).await
            }
            Some(Entry::Empty) => {
                feed_description(client, &DescribePortalResponse::no_data()).await
            }
            None => Err(PgWireError::PortalNotFound(name.to_owned())),
        },
        t => Err(PgWireError::InvalidTargetType(t)),
    }
}

/// Feed a description: the parameters' types (of a statement), then the
/// columns, or `NoData`.
pub(crate) async fn feed_description<C, D>(client: &mut C, d: &D) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    D: DescribeResponse,
{
    if let Some(types) = d.parameters() {
        let oids = types.iter().map(|t| t.oid()).collect();
        client
            .feed(PgWireBackendMessage::ParameterDescription(
                ParameterDescription::new(oids),
            ))
            .await?;
    }
    let m = if d.is_no_data() {
        PgWireBackendMessage::NoData(NoData::new())
    } else {
        let fields = d.fields().iter().map(Into::into).collect();
        PgWireBackendMessage::RowDescription(RowDescription::new(fields))
    };
    client.feed(m).await?;
    Ok(())
}

/// The receiver that fires when a cancel request for this connection
/// arrives while the statement starts (as `pgwire`'s default does).
async fn cancel_receiver<C: ClientInfo>(
    client: &mut C,
) -> Option<futures::channel::oneshot::Receiver<()>> {
    let handle = client.session_extensions().get::<Arc<ConnectionHandle>>()?;
    Some(handle.start_query().await)
}
