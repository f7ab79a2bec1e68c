//! The edge: what every request passes before any route (or the MCP transport, or the
//! dashboard) sees it. A server on a developer's loopback is reachable from every web page the
//! user opens, so before a key is even looked at:
//!
//! - **`Host`** must name this machine (a loopback name or address) or one of `[server]
//!   allowed_hosts`. A page whose own name was rebound to 127.0.0.1 (DNS rebinding) sends its
//!   own name, and is refused. Once the server has keys an empty list answers any name: every
//!   request then carries a key a page cannot forge.
//! - **`Origin`** on a changing request (anything but GET, HEAD and OPTIONS) must be the
//!   request's own host or one of `[server] allowed_origins`; `null` and a `Sec-Fetch-Site:
//!   cross-site` request are refused. Browsers send `Origin` on every such request; SDKs and
//!   agents send none, and pass.
//! - **A JSON route's body must say it is JSON** (`application/json` or `…+json`): the
//!   "simple" requests a page may send anywhere without asking (`text/plain`, forms, no type)
//!   are refused with 415 before they are read. The dashboard's forms (`/ui`) are checked by
//!   their CSRF token instead.
//! - **The body is bounded before it is read**: a `content-length` over the limit is refused at
//!   once, and the body must arrive within the read deadline (408), so a client that never
//!   finishes holds nothing for long. It is read here, whole, so no handler waits on a client.
//!
//! And on the way out, an error answer that is not JSON (the MCP transport's plain-text
//! errors, an empty body from the HTTP layer) is given skald's one JSON error shape.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use crate::error::ApiError;
use crate::state::AppState;

/// The largest non-JSON error body rewritten into the JSON shape; a longer one is cut.
const MAX_REWRITTEN_ERROR_BYTES: usize = 64 * 1024;

/// Admits a request (host, origin, content type, body) or answers the refusal.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match admit(&state, request).await {
        Ok(request) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

async fn admit(state: &AppState, request: Request) -> Result<Request, ApiError> {
    let edge = &state.config.edge;
    let host = request_host(&request);
    check_host(state, host.as_deref())?;
    // Reads change nothing and carry no body to bound; a page cannot read their answers
    // across origins (skald sends no CORS headers).
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return Ok(request);
    }
    check_origin(request.headers(), host.as_deref(), &edge.allowed_origins)?;
    let max_body = state.config.max_body_bytes;
    let declared = declared_length(request.headers())?;
    if let Some(length) = declared
        && length > max_body as u64
    {
        return Err(too_large(max_body));
    }
    let json_route = !is_form_route(request.uri().path());
    let json = is_json(request.headers());
    let announced_body = declared.is_some_and(|length| length > 0)
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    if json_route && announced_body && !json {
        return Err(not_json(request.headers()));
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, max_body);
    let bytes = match tokio::time::timeout(edge.body_read_timeout, limited.collect()).await {
        Err(_) => {
            return Err(ApiError::RequestTimeout(format!(
                "the request body did not arrive within {} s of its headers; send it whole, \
                 or raise [server] body_read_timeout_secs",
                edge.body_read_timeout.as_secs()
            )));
        }
        Ok(Err(error)) => {
            if error
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return Err(too_large(max_body));
            }
            return Err(ApiError::BadRequest(format!(
                "the request body could not be read: {error}"
            )));
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    if json_route && !bytes.is_empty() && !json {
        return Err(not_json(&parts.headers));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The dashboard's pages post HTML forms (checked by their CSRF token and origin); every other
/// route takes JSON.
fn is_form_route(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

fn too_large(max_body: usize) -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the request body is over the server's size limit of {max_body} bytes ([server] \
         max_body_bytes)"
    ))
}

fn not_json(headers: &HeaderMap) -> ApiError {
    let sent = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("none");
    ApiError::UnsupportedMediaType(format!(
        "this route takes a JSON body with `content-type: application/json` (the request's \
         content-type is {sent})"
    ))
}

fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| ApiError::BadRequest("the content-length header is not a number".to_owned()))
}

/// `application/json`, `application/*+json` (parameters such as `charset` allowed).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The authority the request names: `Host`, or HTTP/2's `:authority` (the URI's).
fn request_host(request: &Request) -> Option<String> {
    request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.to_string())
        })
        .map(|host| host.trim().to_ascii_lowercase())
}

/// The host name of an authority without its port: `[::1]:7420` → `::1`, `localhost:7420` →
/// `localhost` (a trailing dot dropped).
fn host_name(authority: &str) -> &str {
    let name = if let Some(rest) = authority.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(inside, _)| inside)
    } else {
        match authority.rsplit_once(':') {
            // One colon: a port. More: a bare IPv6 address.
            Some((name, port))
                if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) =>
            {
                name
            }
            Some(_) | None => authority,
        }
    };
    name.strip_suffix('.').unwrap_or(name)
}

/// A name or address that only this machine answers to.
pub fn is_loopback_name(name: &str) -> bool {
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => v4.is_loopback(),
        Ok(std::net::IpAddr::V6(v6)) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

fn check_host(state: &AppState, host: Option<&str>) -> Result<(), ApiError> {
    // A request with no Host at all is no browser's (every browser sends one).
    let Some(authority) = host else {
        return Ok(());
    };
    let allowed = &state.config.edge.allowed_hosts;
    let name = host_name(authority);
    if is_loopback_name(name)
        || allowed
            .iter()
            .any(|entry| host_matches(entry, authority, name))
    {
        return Ok(());
    }
    if allowed.is_empty() && state.auth_required() {
        return Ok(());
    }
    Err(ApiError::Forbidden(format!(
        "this server does not answer to the host {authority:?}: only to loopback names and \
         [server] allowed_hosts (a page reaching it under another name is refused)"
    )))
}

fn host_matches(entry: &str, authority: &str, name: &str) -> bool {
    let entry = entry.trim().to_ascii_lowercase();
    entry == "*" || entry == authority || entry == name
}

fn check_origin(
    headers: &HeaderMap,
    host: Option<&str>,
    allowed_origins: &[String],
) -> Result<(), ApiError> {
    let cross_site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|site| site.eq_ignore_ascii_case("cross-site"));
    let origin = headers
        .get(header::ORIGIN)
        .map(|value| value.to_str().unwrap_or("").trim().to_ascii_lowercase());
    let refused = |shown: &str| {
        ApiError::Forbidden(format!(
            "a request from the page {shown} may not change anything here: only this server's \
             own pages and [server] allowed_origins may"
        ))
    };
    let Some(origin) = origin else {
        return if cross_site {
            Err(refused("of another site"))
        } else {
            Ok(())
        };
    };
    let origin = origin.trim_end_matches('/');
    if allowed_origins.iter().any(|entry| {
        entry == "*"
            || entry
                .trim()
                .trim_end_matches('/')
                .eq_ignore_ascii_case(origin)
    }) {
        return Ok(());
    }
    let same_origin = origin
        .split_once("://")
        .is_some_and(|(_, authority)| Some(authority) == host);
    if same_origin && !cross_site {
        Ok(())
    } else {
        Err(refused(&format!("{origin:?}")))
    }
}

/// Gives an error answer that is not JSON skald's JSON error shape, its text as the message.
/// The dashboard's pages are HTML on purpose, and are left alone.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let form_route = is_form_route(request.uri().path());
    let response = next.run(request).await;
    let status = response.status();
    if form_route || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.to_ascii_lowercase().contains("json"));
    if json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match http_body_util::Limited::new(body, MAX_REWRITTEN_ERROR_BYTES)
        .collect()
        .await
    {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes())
            .trim()
            .to_owned(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("the request failed")
            .to_owned()
    } else {
        text
    };
    let kind = error_kind(status);
    let mut rewritten = (
        status,
        axum::Json(serde_json::json!({"error": {"type": kind, "message": message}})),
    )
        .into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().append(name, value.clone());
        }
    }
    rewritten
        .extensions_mut()
        .insert(crate::metrics::ErrorNote(message));
    rewritten
}

fn error_kind(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "invalid_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        406 => "not_acceptable",
        408 => "request_timeout",
        409 => "conflict",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        422 => "unprocessable",
        429 => "rate_limited",
        502 => "upstream_error",
        504 => "upstream_timeout",
        500..=599 => "internal_error",
        _ => "invalid_request",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_name_is_read_without_its_port() {
        assert_eq!(host_name("localhost:7420"), "localhost");
        assert_eq!(host_name("[::1]:7420"), "::1");
        assert_eq!(host_name("::1"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("localhost.:80"), "localhost");
        assert_eq!(host_name("evil.example:7420"), "evil.example");
    }

    #[test]
    fn only_this_machines_names_are_loopback() {
        for name in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.8.9.10",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_loopback_name(name), "{name}");
        }
        for name in [
            "evil.example",
            "10.0.0.1",
            "0.0.0.0",
            "localhost.evil.example",
            "::",
        ] {
            assert!(!is_loopback_name(name), "{name}");
        }
    }

    #[test]
    fn json_content_types_are_recognised_with_their_parameters() {
        let mut headers = HeaderMap::new();
        for (value, json) in [
            ("application/json", true),
            ("application/json; charset=utf-8", true),
            ("Application/JSON", true),
            ("application/merge-patch+json", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
            ("text/json", false),
        ] {
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            assert_eq!(is_json(&headers), json, "{value}");
        }
        headers.remove(header::CONTENT_TYPE);
        assert!(!is_json(&headers));
    }

    #[test]
    fn an_origin_is_admitted_on_its_own_host_or_when_allowed() {
        let mut headers = HeaderMap::new();
        assert!(check_origin(&headers, Some("127.0.0.1:7420"), &[]).is_ok());
        headers.insert(header::ORIGIN, "http://127.0.0.1:7420".parse().unwrap());
        assert!(check_origin(&headers, Some("127.0.0.1:7420"), &[]).is_ok());
        headers.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(check_origin(&headers, Some("127.0.0.1:7420"), &[]).is_err());
        assert!(
            check_origin(
                &headers,
                Some("127.0.0.1:7420"),
                &["https://evil.example".to_owned()]
            )
            .is_ok()
        );
        headers.insert(header::ORIGIN, "null".parse().unwrap());
        assert!(check_origin(&headers, Some("127.0.0.1:7420"), &[]).is_err());
        headers.remove(header::ORIGIN);
        headers.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(check_origin(&headers, Some("127.0.0.1:7420"), &[]).is_err());
    }
}
