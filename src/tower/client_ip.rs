//! The client behind trusted proxies: [`ClientIp`], and why a chain it cannot read is refused
//! ([`UnreadableChain`]).
//!
//! # The walk
//!
//! The socket's peer decides whether any header is read at all: a peer outside the trusted
//! CIDRs is the client, whatever it wrote. From a trusted peer, the chain is every field line
//! of the one configured header, in the order they arrived, as if joined by commas, and the
//! client is its rightmost entry that is neither one of the configured trusted hops (counted
//! from the right) nor inside a trusted CIDR. Only the right end of a chain was written by
//! proxies; everything left of the first untrusted entry may be the client's own writing, so
//! nothing there is ever charged. `X-Forwarded-For` is walked from its right end and read no
//! further than that entry; a `Forwarded` line is parsed whole, since its quoted strings
//! decide where its elements end.
//!
//! # Why our own parser
//!
//! The two crates that parse these headers were weighed against the spoofing table in
//! [`crate::tower`]. `client-ip` takes only the last entry of the last field line, so it
//! cannot walk past a second proxy, and its `Forwarded` parser allocates the whole header per
//! request. `http-ip` iterates `for=` values with element boundaries lost (an element without
//! `for` is skipped, so the walk would step into the client's part of the chain), splits
//! quoted strings at their commas, and skips malformed values silently instead of failing.
//! The grammar needed here is small (RFC 7239's elements, pairs and quoted strings, and the
//! comma lists of `X-Forwarded-For`), so it is parsed below from the header's `&str`, without
//! allocating; the CIDRs are `ipnet`'s.

use super::key::{MissingKey, PeerIp};
use super::AdmitConfigError;
use http::header::{HeaderMap, HeaderName, FORWARDED};
use http::Request;
use ipnet::{IpNet, Ipv4Net};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Deref;

use super::key::KeyExtractor;

// Statics, not consts: `Source::name` lends them out.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static FORWARDED_NAME: HeaderName = FORWARDED;

/// Which header carries the client's address.
#[derive(Debug, Clone)]
enum Source {
    /// `X-Forwarded-For`: a comma list of addresses, each proxy appending its peer's.
    XForwardedFor,
    /// `Forwarded` (RFC 7239): elements of `;`-separated pairs, the `for=` pair naming the
    /// proxy's peer.
    Forwarded,
    /// One address a CDN writes whole (`CF-Connecting-IP`, `True-Client-IP`).
    Single(HeaderName),
}

impl Source {
    fn name(&self) -> &HeaderName {
        match self {
            Self::XForwardedFor => &X_FORWARDED_FOR,
            Self::Forwarded => &FORWARDED_NAME,
            Self::Single(name) => name,
        }
    }
}

/// Why the chain of a request from a trusted proxy names no client the layer can charge.
/// Each is refused as [`MissingKey::ForwardedChain`] (400): never charged to an address the
/// client wrote, and never to the proxy's own address (which would put everyone behind it in
/// one bucket).
///
/// ```
/// use admit::tower::{ClientIp, MissingKey, UnreadableChain};
/// use http::HeaderMap;
///
/// let key = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?;
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "unknown".parse()?);
/// let refused = key.client_of("10.0.0.1".parse()?, &headers).unwrap_err();
/// assert!(matches!(refused, MissingKey::ForwardedChain { why: UnreadableChain::Hidden, .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreadableChain {
    /// The trusted proxy sent no such header (or only empty ones): it is not configured to
    /// write it, or the request came from the proxy itself.
    Absent,
    /// Not the header's syntax (an unterminated quoted string, a pair without `=`, bytes
    /// outside visible ASCII), or the entry to charge is not an IP address (a host name, an
    /// IPv6 zone id such as `fe80::1%eth0`, a quoted string with escapes).
    Malformed,
    /// The entry to charge is `unknown`, an obfuscated identifier (`_hidden`), or an element
    /// without `for=`: the proxy did not say who sent the request.
    Hidden,
    /// The walk passed more than [`ClientIp::MAX_ENTRIES`] entries of `X-Forwarded-For`
    /// (trusted hops and proxies) without reaching the client, or `Forwarded` holds more
    /// elements than that across its field lines.
    TooLong,
    /// Every entry is a trusted proxy or one of the trusted hops: no client is named.
    OnlyTrusted,
    /// A single-value header ([`ClientIp::single_header`]) with several field lines or a
    /// comma list.
    NotOneValue,
}

impl fmt::Display for UnreadableChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            Self::Absent => "the trusted proxy sent none (is it set to write it?)",
            Self::Malformed => {
                "it is malformed, or the entry to charge is not an IP address (a name, a zone id)"
            }
            Self::Hidden => {
                "the entry to charge is `unknown` or obfuscated: the proxy did not say who sent it"
            }
            Self::TooLong => {
                return write!(
                    f,
                    "it has more than {} entries, the most read",
                    ClientIp::MAX_ENTRIES
                )
            }
            Self::OnlyTrusted => "every entry in it is a trusted proxy: it names no client",
            Self::NotOneValue => "it holds several values where one is expected",
        };
        f.write_str(why)
    }
}

/// Keys a request by its client's IP address as the trusted proxies in front of the server
/// report it: the first address from the right of `X-Forwarded-For` or `Forwarded` (RFC 7239)
/// that is not a trusted proxy, or a single-value header a CDN sets. IPv6 is masked to its
/// /64 and IPv4-mapped IPv6 keyed as IPv4, as [`PeerIp`] does.
///
/// * **The peer decides.** Headers are read only when the socket's peer is inside a trusted
///   CIDR ([`ClientIp::trust`]); any other peer is charged itself, whatever it wrote. With no
///   CIDR trusted, no header is ever read.
/// * **Trusted hops** ([`ClientIp::trust_hops`]): proxies you run but cannot list by
///   address (a CDN's edges ahead of your balancer) are counted from the right, and only
///   behind a trusted peer: a count alone would let a client that reaches the server
///   directly write the whole chain.
/// * **One header.** The extractor reads the header it is built for and no other, so a
///   client cannot pick the one that suits it; configure the one your proxy writes.
/// * **Refused, never guessed.** A chain that cannot be read ([`UnreadableChain`]) is a
///   [`MissingKey::ForwardedChain`]: the layer refuses it (400) by default. Do not pair this
///   extractor with [`MissingKeyPolicy::Pass`](super::MissingKeyPolicy::Pass): a client
///   would skip every defence by sending a malformed chain through the proxy.
/// * **No allocation** on the way: the header is parsed where it lies, and a bare IPv4
///   entry without going through `str`.
///
/// The spoofing table in [`crate::tower`] lists what each trick gets charged.
///
/// ```
/// use admit::tower::{ClientIp, KeyExtractor};
/// use http::Request;
/// use std::net::{IpAddr, SocketAddr};
///
/// // The balancer at 10.0.0.1 appends its peer to `X-Forwarded-For`.
/// let key = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?;
/// let mut request = Request::get("/")
///     .header("x-forwarded-for", "198.51.100.1, 203.0.113.7") // the client wrote the first
///     .body(())?;
/// request.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 1], 40_000)));
/// assert_eq!(key.extract(&request)?, IpAddr::from([203, 0, 113, 7]));
///
/// // The same header from a peer that is not a trusted proxy is not read.
/// request.extensions_mut().insert(SocketAddr::from(([192, 0, 2, 9], 40_000)));
/// assert_eq!(key.extract(&request)?, IpAddr::from([192, 0, 2, 9]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ClientIp {
    peer: PeerIp,
    source: Source,
    /// The ranges as configured (for `Debug`).
    trusted: Vec<IpNet>,
    /// The same as (network, mask) pairs: a trust check is an AND and a compare per range.
    trusted_v4: Vec<(u32, u32)>,
    trusted_v6: Vec<(u128, u128)>,
    hops: usize,
}

impl ClientIp {
    /// The most entries the walk reads (`X-Forwarded-For`: from the right, up to the client;
    /// `Forwarded`: every element of every line); past it the request is refused
    /// ([`UnreadableChain::TooLong`]). Real chains hold a few; this bounds the work a
    /// request can ask for.
    pub const MAX_ENTRIES: usize = 32;

    fn new(source: Source) -> Self {
        Self {
            peer: PeerIp::new(),
            source,
            trusted: Vec::new(),
            trusted_v4: Vec::new(),
            trusted_v6: Vec::new(),
            hops: 0,
        }
    }

    /// Reads `X-Forwarded-For`, the comma list most proxies append their peer to (nginx's
    /// `$proxy_add_x_forwarded_for`, HAProxy's `option forwardfor`, cloud balancers).
    /// Entries may carry a port (`203.0.113.7:5555`, `[2001:db8::1]:443`).
    pub fn x_forwarded_for() -> Self {
        Self::new(Source::XForwardedFor)
    }

    /// Reads `Forwarded` (RFC 7239): the `for=` of each element, quoted or not, any case.
    ///
    /// ```
    /// use admit::tower::ClientIp;
    /// use http::HeaderMap;
    /// use std::net::IpAddr;
    ///
    /// let key = ClientIp::forwarded().trust("10.0.0.0/8")?;
    /// let mut headers = HeaderMap::new();
    /// headers.insert("forwarded", r#"for=198.51.100.1, For="[2001:db8::1]:4711";proto=https"#.parse()?);
    /// assert_eq!(key.client_of("10.0.0.1".parse()?, &headers)?, "2001:db8::".parse::<IpAddr>()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forwarded() -> Self {
        Self::new(Source::Forwarded)
    }

    /// Reads one address a CDN writes whole (`cf-connecting-ip`, `true-client-ip`), from a
    /// trusted peer only: trust the CDN's egress ranges (or your balancer, if every path to
    /// it goes through the CDN, which overwrites the header). Several values are refused
    /// ([`UnreadableChain::NotOneValue`]); [`ClientIp::trust_hops`] does not apply.
    ///
    /// ```
    /// use admit::tower::ClientIp;
    /// use http::{HeaderMap, HeaderName};
    /// use std::net::IpAddr;
    ///
    /// let key = ClientIp::single_header(HeaderName::from_static("cf-connecting-ip"))
    ///     .trust("173.245.48.0/20")?;
    /// let mut headers = HeaderMap::new();
    /// headers.insert("cf-connecting-ip", "203.0.113.7".parse()?);
    /// assert_eq!(key.client_of("173.245.48.1".parse()?, &headers)?, IpAddr::from([203, 0, 113, 7]));
    /// assert_eq!(key.client_of("192.0.2.9".parse()?, &headers)?, IpAddr::from([192, 0, 2, 9]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn single_header(name: HeaderName) -> Self {
        Self::new(Source::Single(name))
    }

    /// Trusts the proxies at `proxies`: a CIDR (`10.0.0.0/8`, `2001:db8:1::/48`) or one
    /// address (`192.0.2.7`). Call it once per range. A peer inside one has its header read,
    /// and an entry inside one is passed over in the walk. IPv4-mapped IPv6 ranges are
    /// stored as the IPv4 range they map.
    ///
    /// Refuses text that is neither ([`AdmitConfigError::ProxyNotCidr`]) and a range that
    /// holds every address (`0.0.0.0/0`, `::/0`: [`AdmitConfigError::TrustsEveryAddress`]),
    /// which would let any client write its own identity.
    ///
    /// ```
    /// use admit::tower::{AdmitConfigError, ClientIp};
    ///
    /// let key = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?.trust("2001:db8:1::/48")?;
    /// # let _ = key;
    /// assert_eq!(ClientIp::x_forwarded_for().trust("lb.internal").unwrap_err(), AdmitConfigError::ProxyNotCidr);
    /// assert_eq!(ClientIp::x_forwarded_for().trust("0.0.0.0/0").unwrap_err(), AdmitConfigError::TrustsEveryAddress);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trust(mut self, proxies: &str) -> Result<Self, AdmitConfigError> {
        let text = proxies.trim();
        let net = match text.parse::<IpNet>() {
            Ok(net) => net,
            Err(_) => IpNet::from(
                text.parse::<IpAddr>()
                    .map_err(|_| AdmitConfigError::ProxyNotCidr)?,
            ),
        };
        let net = match net {
            IpNet::V6(v6) => match (v6.addr().to_ipv4_mapped(), v6.prefix_len()) {
                (Some(v4), bits) if bits >= 96 => Ipv4Net::new(v4, bits - 96)
                    .map(IpNet::V4)
                    .map_err(|_| AdmitConfigError::ProxyNotCidr)?,
                _ => net,
            },
            IpNet::V4(_) => net,
        };
        if net.prefix_len() == 0 {
            return Err(AdmitConfigError::TrustsEveryAddress);
        }
        let net = net.trunc();
        match net {
            IpNet::V4(v4) => self
                .trusted_v4
                .push((u32::from(v4.network()), u32::from(v4.netmask()))),
            IpNet::V6(v6) => self
                .trusted_v6
                .push((u128::from(v6.network()), u128::from(v6.netmask()))),
        }
        self.trusted.push(net);
        Ok(self)
    }

    /// Also passes over the `hops` rightmost entries of the chain, whatever their address:
    /// proxies you run but cannot list (a CDN's edges ahead of a trusted balancer). Only ever
    /// behind a trusted peer, so a client reaching the server directly gains nothing by
    /// writing a chain. At most [`ClientIp::MAX_ENTRIES`]
    /// ([`AdmitConfigError::TooManyHops`]).
    ///
    /// ```
    /// use admit::tower::ClientIp;
    /// use http::HeaderMap;
    /// use std::net::IpAddr;
    ///
    /// // client → CDN edge (192.0.2.10, not listed) → balancer (10.0.0.1) → server
    /// let key = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?.trust_hops(1)?;
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-forwarded-for", "198.51.100.1, 203.0.113.7, 192.0.2.10".parse()?);
    /// assert_eq!(key.client_of("10.0.0.1".parse()?, &headers)?, IpAddr::from([203, 0, 113, 7]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trust_hops(mut self, hops: usize) -> Result<Self, AdmitConfigError> {
        if hops > Self::MAX_ENTRIES {
            return Err(AdmitConfigError::TooManyHops { hops });
        }
        self.hops = hops;
        Ok(self)
    }

    /// Masks IPv6 addresses to their first `bits` bits, as [`PeerIp::ipv6_prefix`] does
    /// (default 64).
    pub fn ipv6_prefix(mut self, bits: u8) -> Result<Self, AdmitConfigError> {
        self.peer = self.peer.ipv6_prefix(bits)?;
        Ok(self)
    }

    /// Reads the socket's peer from an extension of type `E` (axum's
    /// `ConnectInfo<SocketAddr>`), as [`PeerIp::from_extension`] does; by default a bare
    /// [`SocketAddr`].
    pub fn from_extension<E>(mut self) -> Self
    where
        E: Deref<Target = SocketAddr> + Send + Sync + 'static,
    {
        self.peer = self.peer.from_extension::<E>();
        self
    }

    /// The header read.
    pub fn header(&self) -> &HeaderName {
        self.source.name()
    }

    /// The identity a request from `peer` with `headers` is charged to: `peer` itself unless
    /// it is trusted, else the client the header names, masked as [`PeerIp::key_of`] masks.
    pub fn client_of(&self, peer: IpAddr, headers: &HeaderMap) -> Result<IpAddr, MissingKey> {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return Ok(self.peer.key_of(peer));
        }
        let named = match &self.source {
            Source::XForwardedFor => self.walk_x_forwarded_for(headers),
            Source::Forwarded => self.walk_forwarded(headers),
            Source::Single(name) => self.single(name, headers),
        };
        named
            .map(|ip| self.peer.key_of(ip))
            .map_err(|why| MissingKey::ForwardedChain {
                header: self.header().clone(),
                why,
            })
    }

    /// Whether `request` came from a trusted proxy: its socket's peer (read as
    /// [`ClientIp::from_extension`] says) is inside a trusted CIDR. What else a request
    /// carries is believed only then: the chain this extractor walks, and a per-route cost
    /// ([`Rule::weight_from_header`](super::Rule::weight_from_header)). `false` when the
    /// server records no peer.
    ///
    /// ```
    /// use admit::tower::ClientIp;
    /// use http::Request;
    /// use std::net::SocketAddr;
    ///
    /// let proxies = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?;
    /// let mut request = Request::get("/").body(())?;
    /// assert!(!proxies.is_trusted_peer(&request), "no peer recorded");
    /// request.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 1], 40_000)));
    /// assert!(proxies.is_trusted_peer(&request));
    /// request.extensions_mut().insert(SocketAddr::from(([192, 0, 2, 9], 40_000)));
    /// assert!(!proxies.is_trusted_peer(&request));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_trusted_peer<B>(&self, request: &Request<B>) -> bool {
        self.is_trusted_peer_in(request.extensions())
    }

    /// [`ClientIp::is_trusted_peer`] for a request's extensions (where the peer is recorded).
    pub(crate) fn is_trusted_peer_in(&self, extensions: &http::Extensions) -> bool {
        self.peer
            .peer_addr(extensions)
            .is_some_and(|peer| self.trusts(peer.ip().to_canonical()))
    }

    /// Whether `ip` (canonical) is inside a trusted CIDR.
    fn trusts(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => {
                let ip = u32::from(v4);
                self.trusted_v4.iter().any(|&(net, mask)| ip & mask == net)
            }
            IpAddr::V6(v6) => {
                let ip = u128::from(v6);
                self.trusted_v6.iter().any(|&(net, mask)| ip & mask == net)
            }
        }
    }

    /// `X-Forwarded-For` from the right: its entries are independent, so the walk reads the
    /// last field line first, each from its end, and stops at the first entry that is not
    /// passed over; nothing left of it is read.
    fn walk_x_forwarded_for(&self, headers: &HeaderMap) -> Result<IpAddr, UnreadableChain> {
        let mut walked = 0;
        for line in headers.get_all(&X_FORWARDED_FOR).iter().rev() {
            for item in line.as_bytes().rsplit(|&b| b == b',') {
                let item = trim_ows_bytes(item);
                if item.is_empty() {
                    continue;
                }
                walked += 1;
                if walked > Self::MAX_ENTRIES {
                    return Err(UnreadableChain::TooLong);
                }
                if walked <= self.hops {
                    continue;
                }
                let ip = node_bytes(item)?.to_canonical();
                if !self.trusts(ip) {
                    return Ok(ip);
                }
            }
        }
        Err(match walked {
            0 => UnreadableChain::Absent,
            _ => UnreadableChain::OnlyTrusted,
        })
    }

    /// `Forwarded`: a line's element boundaries are known only once its quoted strings are,
    /// so every line is parsed left to right (a first pass counts the elements when there
    /// are trusted hops), and the last element neither within the hops nor trusted is kept.
    fn walk_forwarded(&self, headers: &HeaderMap) -> Result<IpAddr, UnreadableChain> {
        let considered = if self.hops == 0 {
            usize::MAX
        } else {
            each_element(headers, |_| {})?.saturating_sub(self.hops)
        };
        let mut index = 0;
        let mut candidate = None;
        let elements = each_element(headers, |entry| {
            if index < considered {
                match entry.map(|ip| ip.to_canonical()) {
                    Ok(ip) if self.trusts(ip) => {}
                    other => candidate = Some(other),
                }
            }
            index += 1;
        })?;
        if elements == 0 {
            return Err(UnreadableChain::Absent);
        }
        candidate.unwrap_or(Err(UnreadableChain::OnlyTrusted))
    }

    /// The one address of a single-value header.
    fn single(&self, name: &HeaderName, headers: &HeaderMap) -> Result<IpAddr, UnreadableChain> {
        let mut lines = headers.get_all(name).iter();
        let line = lines.next().ok_or(UnreadableChain::Absent)?;
        if lines.next().is_some() {
            return Err(UnreadableChain::NotOneValue);
        }
        let text = trim_ows(line.to_str().map_err(|_| UnreadableChain::Malformed)?);
        if text.is_empty() {
            return Err(UnreadableChain::Absent);
        }
        if text.contains(',') {
            return Err(UnreadableChain::NotOneValue);
        }
        let ip = node(text)?;
        if self.trusts(ip.to_canonical()) {
            return Err(UnreadableChain::OnlyTrusted);
        }
        Ok(ip)
    }
}

impl fmt::Debug for ClientIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIp")
            .field("header", self.header())
            .field("trusted", &self.trusted)
            .field("hops", &self.hops)
            .field("peer", &self.peer)
            .finish()
    }
}

impl<B> KeyExtractor<B> for ClientIp {
    type Key<'r>
        = IpAddr
    where
        B: 'r;

    fn extract(&self, request: &Request<B>) -> Result<IpAddr, MissingKey> {
        let peer = self
            .peer
            .peer_addr(request.extensions())
            .ok_or(MissingKey::PeerAddr)?;
        self.client_of(peer.ip(), request.headers())
    }
}

/// Calls `visit` with each `Forwarded` element's `for=` node (its address, or why it has
/// none), left to right across the field lines; returns how many there were.
fn each_element(
    headers: &HeaderMap,
    mut visit: impl FnMut(Result<IpAddr, UnreadableChain>),
) -> Result<usize, UnreadableChain> {
    let mut count = 0;
    let mut see = |entry| {
        count += 1;
        if count > ClientIp::MAX_ENTRIES {
            return Err(UnreadableChain::TooLong);
        }
        visit(entry);
        Ok(())
    };
    for line in headers.get_all(&FORWARDED_NAME) {
        let line = line.to_str().map_err(|_| UnreadableChain::Malformed)?;
        let mut elements = ForwardedLine { rest: line };
        while let Some(entry) = elements.next_element()? {
            see(entry)?;
        }
    }
    Ok(count)
}

/// Optional whitespace (RFC 9110: spaces and tabs).
fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn trim_ows(text: &str) -> &str {
    text.trim_matches(is_ows)
}

pub(super) fn trim_ows_bytes(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

/// [`node`] for an entry's bytes, with a fast path for the common case, a bare IPv4 address
/// (exactly what `Ipv4Addr`'s parser accepts: four decimal octets up to 255, no leading
/// zero).
fn node_bytes(bytes: &[u8]) -> Result<IpAddr, UnreadableChain> {
    if let Some(v4) = ipv4(bytes) {
        return Ok(IpAddr::V4(v4));
    }
    // Anything that is not ASCII is no address (`to_str` would have refused it as well).
    let text = std::str::from_utf8(bytes).map_err(|_| UnreadableChain::Malformed)?;
    node(text)
}

/// A bare dotted-quad IPv4 address, or `None` (then the full parser decides).
pub(super) fn ipv4(bytes: &[u8]) -> Option<Ipv4Addr> {
    let mut parts = bytes.split(|&b| b == b'.');
    let mut octets = [0_u8; 4];
    for octet in &mut octets {
        *octet = decimal_octet(parts.next()?)?;
    }
    match parts.next() {
        None => Some(Ipv4Addr::from(octets)),
        Some(_) => None,
    }
}

/// 0 to 255 in decimal, without a leading zero ("01" is refused, as `Ipv4Addr`'s parser
/// refuses it).
fn decimal_octet(digits: &[u8]) -> Option<u8> {
    let digit = |b: u8| b.is_ascii_digit().then(|| u16::from(b - b'0'));
    let value = match *digits {
        [a] => digit(a)?,
        [a @ b'1'..=b'9', b] => digit(a)? * 10 + digit(b)?,
        [a @ b'1'..=b'9', b, c] => digit(a)? * 100 + digit(b)? * 10 + digit(c)?,
        _ => return None,
    };
    u8::try_from(value).ok()
}

/// A token character (RFC 9110 `tchar`).
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// One node (RFC 7239 §6; an `X-Forwarded-For` entry is read the same way): an IPv4 address
/// or an IPv6 one, bracketed or bare, with an optional port; `unknown` or an obfuscated
/// `_identifier` is [`UnreadableChain::Hidden`]; anything else (a name, a zone id) is
/// [`UnreadableChain::Malformed`].
fn node(text: &str) -> Result<IpAddr, UnreadableChain> {
    if text.eq_ignore_ascii_case("unknown") || text.starts_with('_') {
        return Err(UnreadableChain::Hidden);
    }
    if let Some(bracketed) = text.strip_prefix('[') {
        let (addr, after) = bracketed
            .split_once(']')
            .ok_or(UnreadableChain::Malformed)?;
        let ip = addr
            .parse::<Ipv6Addr>()
            .map_err(|_| UnreadableChain::Malformed)?;
        return match after {
            "" => Ok(IpAddr::V6(ip)),
            _ => port(after.strip_prefix(':'))
                .map(|()| IpAddr::V6(ip))
                .ok_or(UnreadableChain::Malformed),
        };
    }
    // A bare address: IPv4, or IPv6 without a port (a port needs the brackets).
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(ip);
    }
    let (addr, after) = text.split_once(':').ok_or(UnreadableChain::Malformed)?;
    let ip = addr
        .parse::<Ipv4Addr>()
        .map_err(|_| UnreadableChain::Malformed)?;
    port(Some(after))
        .map(|()| IpAddr::V4(ip))
        .ok_or(UnreadableChain::Malformed)
}

/// `Some(())` if `text` is a port: 1 to 5 digits, or an obfuscated `_port`.
fn port(text: Option<&str>) -> Option<()> {
    let text = text?;
    let digits = (1..=5).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit());
    let obfuscated = text.len() > 1
        && text.starts_with('_')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    (digits || obfuscated).then_some(())
}

/// The elements of one `Forwarded` field line (RFC 7239 §4), left to right:
/// `element *( "," element )`, an element `pair *( ";" pair )`, a pair `token "=" value`
/// with a token or quoted-string value. Whitespace around the separators is accepted.
struct ForwardedLine<'a> {
    rest: &'a str,
}

impl<'a> ForwardedLine<'a> {
    /// The next element's `for=` node, `None` at the end, or `Err` when the line is not the
    /// header's syntax (its element boundaries cannot be trusted then).
    fn next_element(&mut self) -> Result<Option<Result<IpAddr, UnreadableChain>>, UnreadableChain> {
        // Empty elements (`a, , b`) are allowed by the list syntax and skipped.
        let mut rest = self.rest.trim_start_matches(|c| is_ows(c) || c == ',');
        if rest.is_empty() {
            self.rest = rest;
            return Ok(None);
        }
        let mut for_node = None;
        let mut fors = 0;
        loop {
            rest = rest.trim_start_matches(is_ows);
            if let Some(after) = rest.strip_prefix(';') {
                rest = after;
                continue;
            }
            if rest.is_empty() || rest.starts_with(',') {
                break;
            }
            let key_end = rest.find(|c| !is_tchar(c)).unwrap_or(rest.len());
            let (key, after) = rest.split_at_checked(key_end).unwrap_or((rest, ""));
            if key.is_empty() {
                return Err(UnreadableChain::Malformed);
            }
            let after = after.strip_prefix('=').ok_or(UnreadableChain::Malformed)?;
            let (value, plain, after) = value(after)?;
            if key.eq_ignore_ascii_case("for") {
                fors += 1;
                for_node = Some(if plain {
                    node(value)
                } else {
                    Err(UnreadableChain::Malformed)
                });
            }
            rest = after.trim_start_matches(is_ows);
            if !(rest.is_empty() || rest.starts_with(',') || rest.starts_with(';')) {
                return Err(UnreadableChain::Malformed);
            }
        }
        self.rest = rest;
        Ok(Some(match (fors, for_node) {
            (1, Some(node)) => node,
            // Twice in one element is not the syntax (RFC 7239 §4: once per element).
            (2.., _) => Err(UnreadableChain::Malformed),
            _ => Err(UnreadableChain::Hidden),
        }))
    }
}

/// A pair's value at the start of `text`: the value, whether it needed no unescaping, and
/// what follows it.
fn value(text: &str) -> Result<(&str, bool, &str), UnreadableChain> {
    if let Some(quoted) = text.strip_prefix('"') {
        let mut escaped = false;
        let mut after_backslash = false;
        for (at, c) in quoted.char_indices() {
            if after_backslash {
                after_backslash = false;
            } else if c == '\\' {
                escaped = true;
                after_backslash = true;
            } else if c == '"' {
                let (inside, closing) = quoted.split_at_checked(at).unwrap_or((quoted, ""));
                let after = closing.strip_prefix('"').unwrap_or(closing);
                return Ok((inside, !escaped, after));
            }
        }
        return Err(UnreadableChain::Malformed);
    }
    let end = text
        .find(|c| is_ows(c) || c == ';' || c == ',' || c == '"')
        .unwrap_or(text.len());
    match text.split_at_checked(end) {
        Some((value, after)) if !value.is_empty() => Ok((value, true, after)),
        _ => Err(UnreadableChain::Malformed),
    }
}
