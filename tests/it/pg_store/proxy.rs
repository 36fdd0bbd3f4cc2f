//! A loopback TCP proxy in front of the test cluster, which cuts recon's
//! connection at the COMMIT of a write: the moment a lost commit happens.
//!
//! It forwards bytes both ways for every connection it accepts. Once
//! armed, it watches what the client sends: after a write transaction's
//! start (`START TRANSACTION ISOLATION LEVEL READ COMMITTED`, as recon's
//! writes begin; its reads begin `READ ONLY`), the simple-query message
//! `COMMIT` is where it acts, once:
//! - [`Cut::BeforeServer`]: the COMMIT is never forwarded; both sides are
//!   closed (the server rolls the transaction back);
//! - [`Cut::AfterServer`]: the COMMIT is forwarded, the server's answer is
//!   read and dropped (so the commit is done), then both sides are closed;
//! - [`Cut::ClientOnly`]: the COMMIT is never forwarded, and only the
//!   client's side is closed.
//!
//! With `reachable` false it closes its listening socket before cutting,
//! so recon's attempt to ask again finds nothing listening. The events
//! are ordered by the bytes themselves: nothing sleeps.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;

/// Where the cut falls relative to the server's COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    BeforeServer,
    AfterServer,
    /// As `BeforeServer`, but only the client's side is closed: the
    /// server's session stays open, inside its transaction, as behind a
    /// peer that vanished without a word.
    ClientOnly,
}

/// The simple-query message `COMMIT`: 'Q', its length (4 + 7), the text.
const COMMIT: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";
const WRITE_START: &[u8] = b"ISOLATION LEVEL READ COMMITTED";

#[derive(Default)]
struct Plan {
    cut: Option<(Cut, bool)>,
}

pub struct Proxy {
    pub port: u16,
    plan: Arc<Mutex<Plan>>,
    closed: Arc<AtomicBool>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `127.0.0.1:target`.
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("its address").port();
        let proxy = Proxy {
            port,
            plan: Arc::default(),
            closed: Arc::default(),
        };
        let (plan, closed) = (proxy.plan.clone(), proxy.closed.clone());
        let (gone, dropped) = channel();
        let dropped = Arc::new(Mutex::new(dropped));
        thread::spawn(move || {
            for client in listener.incoming() {
                if closed.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let link = Link {
                    client,
                    server,
                    plan: plan.clone(),
                    closed: closed.clone(),
                    dropped: dropped.clone(),
                    port,
                };
                link.run();
            }
            drop(listener);
            drop(gone);
        });
        proxy
    }

    /// The next write's COMMIT is cut as `cut`; with `reachable` false the
    /// proxy stops listening first.
    pub fn arm(&self, cut: Cut, reachable: bool) {
        self.plan.lock().expect("the plan").cut = Some((cut, reachable));
    }

    /// `url` with its port replaced by the proxy's.
    pub fn url(&self, url: &str, target: u16) -> String {
        url.replace(&format!(":{target}/"), &format!(":{}/", self.port))
    }
}

/// One accepted connection and the server connection it forwards to.
struct Link {
    client: TcpStream,
    server: TcpStream,
    plan: Arc<Mutex<Plan>>,
    closed: Arc<AtomicBool>,
    /// Disconnected once the accept loop has dropped the listener.
    dropped: Arc<Mutex<Receiver<()>>>,
    port: u16,
}

impl Link {
    fn run(self) {
        let muted = Arc::new(AtomicBool::new(false));
        let (mut from_server, mut to_client) = (clone(&self.server), clone(&self.client));
        let hang_up = (clone(&self.client), clone(&self.server));
        let muted_too = muted.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n @ 1..) = from_server.read(&mut buf) {
                if muted_too.load(Ordering::SeqCst) {
                    // The server's answer to the COMMIT: the commit is
                    // done, and the client never hears it.
                    break;
                }
                if to_client.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = hang_up.0.shutdown(Shutdown::Both);
            let _ = hang_up.1.shutdown(Shutdown::Both);
        });
        thread::spawn(move || self.client_to_server(&muted));
    }

    fn client_to_server(mut self, muted: &AtomicBool) {
        let mut buf = [0u8; 65536];
        let mut in_write = false;
        while let Ok(n @ 1..) = self.client.read(&mut buf) {
            let chunk = &buf[..n];
            if contains(chunk, b"START TRANSACTION") {
                in_write = contains(chunk, WRITE_START);
            }
            let plan = if in_write && contains(chunk, COMMIT) {
                self.plan.lock().expect("the plan").cut.take()
            } else {
                None
            };
            match plan {
                None => {}
                Some((cut, reachable)) => {
                    if !reachable {
                        self.stop_listening();
                    }
                    match cut {
                        Cut::BeforeServer => break,
                        Cut::ClientOnly => {
                            // The other direction keeps the server's side
                            // open until the server closes it.
                            let _ = self.client.shutdown(Shutdown::Both);
                            return;
                        }
                        Cut::AfterServer => {}
                    }
                    muted.store(true, Ordering::SeqCst);
                    let _ = self.server.write_all(chunk);
                    return; // the other direction hangs up on the answer
                }
            }
            if self.server.write_all(chunk).is_err() {
                break;
            }
        }
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }

    /// Closes the listening socket: the accept loop sees the flag on the
    /// connection made here to wake it, and drops the listener; this
    /// returns once it has (the loop's end of the channel is gone).
    fn stop_listening(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        let _ = self.dropped.lock().expect("the channel").recv();
    }
}

fn clone(stream: &TcpStream) -> TcpStream {
    stream.try_clone().expect("clone a socket")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
