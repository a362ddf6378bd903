//! The text and meta protocols' side of a connection: decode the request at the start of
//! the input, run it ([`crate::dispatch`]), or render the refusal the codec decided.

use std::sync::atomic::Ordering::Relaxed;

use memkit_protocol::{DecodeError, ErrorReply, Request, decode_request, meta_key};

use crate::dispatch::{dispatch, resume};
use crate::exec::{Action, Cx, Step};
use crate::state::Shared;

/// Handles the text or meta request at the start of `buf`, appending its reply to `out`.
pub(super) fn text_step(buf: &[u8], sh: &Shared, cx: &mut Cx, out: &mut Vec<u8>) -> Step {
    match decode_request(buf, &sh.limits) {
        Ok((req, used)) => {
            trace_request(sh, cx.id, &req, &buf[..used]);
            Step::Done {
                used,
                swallow: 0,
                action: dispatch(&req, sh, cx, out),
                mutates: req.mutates(),
            }
        }
        Err(DecodeError::Incomplete) => Step::Incomplete,
        Err(DecodeError::Reject(r)) => {
            let mut mutates = false;
            if r.reply == ErrorReply::TooLarge {
                let key = r.unlink.and_then(|(k, b64)| meta_key(k, b64));
                mutates = key.is_some();
                if crate::exec::refuse_too_large(sh, cx, key.as_deref()) {
                    // Not consumed: it runs again, and is answered, after the job.
                    return Step::Done {
                        used: r.consumed,
                        swallow: 0,
                        action: Action::Remote,
                        mutates,
                    };
                }
            }
            r.encode(out);
            Step::Done {
                used: r.consumed,
                swallow: r.swallow,
                action: Action::Continue,
                mutates,
            }
        }
        Err(DecodeError::Close | DecodeError::Malformed) => Step::Done {
            used: 0,
            swallow: 0,
            action: Action::Close,
            mutates: false,
        },
    }
}

/// The rest of the multi-get at the start of `buf`, from byte `skip` of its key list on
/// (the parts before it were answered). The request decoded before, so it decodes again.
pub(super) fn dispatch_rest(
    buf: &[u8],
    skip: usize,
    sh: &Shared,
    cx: &mut Cx,
    out: &mut Vec<u8>,
) -> Action {
    match decode_request(buf, &sh.limits) {
        Ok((req, _)) => dispatch(&resume(&req, skip), sh, cx, out),
        Err(_) => Action::Close,
    }
}

fn trace_request(sh: &Shared, id: u64, req: &Request<'_>, raw: &[u8]) {
    if req.is_meta() {
        sh.counters.cmd_meta.fetch_add(1, Relaxed);
    }
    // `-vv`'s request line; the filter (`-vv`, `verbosity 2` or `RUST_LOG`) decides.
    if tracing::enabled!(target: crate::log::REQUESTS, tracing::Level::DEBUG) {
        let line = raw.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        tracing::debug!(target: crate::log::REQUESTS, "<{id} {}", line.trim_end());
    }
}
