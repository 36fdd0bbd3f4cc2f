//! Where an operation came from when an agent sent it through the MCP door
//! (SPEC 13): the agent's idempotency key, the rules a key must follow,
//! the operation id a key names, and the client's name. Pure: the key is
//! hashed, nothing is read or written.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The most characters a key may hold.
pub const MAX_KEY_CHARS: usize = 128;

/// The door an operation came through, as its `prepared` entry records it.
pub const MCP_DOOR: &str = "mcp";

/// An operation that came through MCP: its key and, where the protocol
/// gave one, the client's name (`clientInfo.name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub door: String,
    pub key: String,
    pub client: Option<String>,
}

impl Origin {
    /// An operation sent through MCP with `key` by `client`.
    pub fn mcp(key: &str, client: Option<&str>) -> Origin {
        Origin {
            door: MCP_DOOR.to_string(),
            key: key.to_string(),
            client: client.map(str::to_string),
        }
    }
}

/// Whether `key` is a key: 1 to 128 characters of `[A-Za-z0-9._:-]`;
/// the reason when it is not.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("a key holds at least one character".into());
    }
    if key.chars().count() > MAX_KEY_CHARS {
        return Err(format!("a key holds at most {MAX_KEY_CHARS} characters"));
    }
    if let Some(bad) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._:-".contains(*c)))
    {
        return Err(format!(
            "a key holds only A-Z, a-z, 0-9 and . _ : -, not {}",
            super::names::describe(bad)
        ));
    }
    Ok(())
}

/// The operation id a key names: `mcp-` and the first 32 hex digits of
/// SHA-256 over the key.
pub fn op_id_of_key(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("mcp-{}", &hex[..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_mcp_and_the_first_32_hex_digits_of_its_sha256() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(op_id_of_key("abc"), "mcp-ba7816bf8f01cfea414140de5dae2223");
    }

    #[test]
    fn a_key_is_1_to_128_characters_of_the_allowed_set() {
        assert!(check_key("order-1:retry_2.a").is_ok());
        assert!(check_key(&"k".repeat(128)).is_ok());
        assert!(check_key("").is_err());
        assert!(check_key(&"k".repeat(129)).is_err());
        assert!(check_key("a b").is_err());
        assert!(check_key("é").is_err());
    }
}
