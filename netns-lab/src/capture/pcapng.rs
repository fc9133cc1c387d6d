//! pcapng, the format Wireshark and tshark read and write: the writer the
//! lab's captures use and the reader `lab rtts` uses. Only the blocks a
//! packet capture needs: a section header, interface descriptions and
//! enhanced packet blocks (others are skipped on reading).

use std::io::{self, Write};

use anyhow::{bail, Context, Result};

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 1;
const SIMPLE_PACKET: u32 = 3;
const ENHANCED_PACKET: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USER_APPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;
pub const LINKTYPE_ETHERNET: u16 = 1;
pub const LINKTYPE_RAW: u16 = 101;
const LINKTYPE_IPV4: u16 = 228;

/// Which way a packet crossed the interface (epb_flags bits 0-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Inbound,
    Outbound,
}

/// One interface of a capture as it is described in the file.
#[derive(Clone, Debug)]
pub struct Interface {
    pub name: String,
    pub description: String,
    pub snaplen: u32,
}

/// A pcapng section being written: one interface per capture point, every
/// timestamp in nanoseconds (if_tsresol 9).
pub struct Writer<W: Write> {
    out: W,
    written: u64,
    /// One packet block's body, kept between packets: no allocation per packet.
    body: Vec<u8>,
}

fn push_option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    buf.extend_from_slice(&code.to_le_bytes());
    buf.extend_from_slice(&(value.len() as u16).to_le_bytes());
    buf.extend_from_slice(value);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

fn end_options(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&OPT_END.to_le_bytes());
    buf.extend_from_slice(&0u16.to_le_bytes());
}

impl<W: Write> Writer<W> {
    /// Starts the section, `comment` saying what the capture is.
    pub fn new(mut out: W, comment: &str, interfaces: &[Interface]) -> io::Result<Writer<W>> {
        let mut body = Vec::new();
        body.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        // Section length unknown: the file is written as it goes.
        body.extend_from_slice(&(-1i64).to_le_bytes());
        push_option(&mut body, OPT_COMMENT, comment.as_bytes());
        push_option(
            &mut body,
            SHB_USER_APPL,
            concat!("dctcp-bpf lab ", env!("CARGO_PKG_VERSION")).as_bytes(),
        );
        end_options(&mut body);
        let mut written = write_block(&mut out, SECTION_HEADER, &body)?;
        for i in interfaces {
            let mut body = Vec::new();
            body.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
            body.extend_from_slice(&0u16.to_le_bytes());
            body.extend_from_slice(&i.snaplen.to_le_bytes());
            push_option(&mut body, IF_NAME, i.name.as_bytes());
            push_option(&mut body, IF_DESCRIPTION, i.description.as_bytes());
            push_option(&mut body, IF_TSRESOL, &[9]);
            end_options(&mut body);
            written += write_block(&mut out, INTERFACE_DESCRIPTION, &body)?;
        }
        Ok(Writer {
            out,
            written,
            body: Vec::new(),
        })
    }

    /// The bytes a packet of `captured` bytes takes in the file.
    pub fn packet_block_len(captured: usize) -> u64 {
        // Header and trailer 12, fixed fields 20, the data padded, the
        // flags option 8 and the end of options 4.
        (12 + 20 + captured.next_multiple_of(4) + 8 + 4) as u64
    }

    pub fn packet(
        &mut self,
        interface: u32,
        ts_ns: u64,
        original_len: u32,
        data: &[u8],
        direction: Direction,
    ) -> io::Result<()> {
        let body = &mut self.body;
        body.clear();
        body.extend_from_slice(&interface.to_le_bytes());
        body.extend_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(ts_ns as u32).to_le_bytes());
        body.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(&original_len.to_le_bytes());
        body.extend_from_slice(data);
        body.resize(body.len().next_multiple_of(4), 0);
        let flags: u32 = match direction {
            Direction::Inbound => 1,
            Direction::Outbound => 2,
        };
        push_option(body, EPB_FLAGS, &flags.to_le_bytes());
        end_options(body);
        self.written += write_block(&mut self.out, ENHANCED_PACKET, body)?;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

fn write_block(out: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<u64> {
    let total = (12 + body.len()) as u32;
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&total.to_le_bytes())?;
    Ok(u64::from(total))
}

/// An interface as a capture file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadInterface {
    pub name: String,
    pub linktype: u16,
    /// if_tsresol: the timestamp's unit is 10^-v s, or 2^-v s with the
    /// high bit set (default 6: microseconds).
    tsresol: u8,
}

impl ReadInterface {
    fn ns(&self, units: u64) -> u64 {
        let v = u32::from(self.tsresol & 0x7f);
        if self.tsresol & 0x80 != 0 {
            ((u128::from(units) * 1_000_000_000) >> v) as u64
        } else if v <= 9 {
            units.saturating_mul(10u64.pow(9 - v))
        } else {
            units / 10u64.saturating_pow(v - 9)
        }
    }
}

/// One captured packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPacket {
    pub interface: u32,
    pub ts_ns: u64,
    pub original_len: u32,
    pub data: Vec<u8>,
}

/// A whole capture file, read into memory.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    pub interfaces: Vec<ReadInterface>,
    pub packets: Vec<ReadPacket>,
}

/// A cursor over one block's body in the section's byte order.
struct Fields<'a> {
    b: &'a [u8],
    big: bool,
}

impl Fields<'_> {
    fn u16(&self, at: usize) -> u16 {
        let v = [self.b[at], self.b[at + 1]];
        if self.big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        }
    }
    fn u32(&self, at: usize) -> u32 {
        let v = [self.b[at], self.b[at + 1], self.b[at + 2], self.b[at + 3]];
        if self.big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        }
    }
    /// The options from `at` on: (code, value) until opt_endofopt.
    fn options(&self, mut at: usize) -> Vec<(u16, &[u8])> {
        let mut out = Vec::new();
        while at + 4 <= self.b.len() {
            let (code, len) = (self.u16(at), usize::from(self.u16(at + 2)));
            if code == OPT_END || at + 4 + len > self.b.len() {
                break;
            }
            out.push((code, &self.b[at + 4..at + 4 + len]));
            at += 4 + len.next_multiple_of(4);
        }
        out
    }
}

/// Reads a pcapng file's packets, with their interfaces. A file that is
/// not pcapng, or is cut short or corrupt, is an error naming where.
pub fn read(bytes: &[u8]) -> Result<Capture> {
    if bytes.is_empty() {
        bail!("the file is empty: no capture in it");
    }
    if bytes.len() < 4 || u32::from_le_bytes(bytes[..4].try_into().unwrap()) != SECTION_HEADER {
        let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        bail!(
            "not a pcapng file: it starts {} where a pcapng section header starts 0a0d0d0a \
             (a classic pcap starts d4c3b2a1 or a1b2c3d4: `editcap -F pcapng` converts it)",
            head.join(" ")
        );
    }
    let mut cap = Capture::default();
    let mut big = false;
    let mut at = 0;
    while at < bytes.len() {
        if bytes.len() - at < 12 {
            bail!(
                "cut short at byte {at}: {} bytes where a block needs 12 or more",
                bytes.len() - at
            );
        }
        let kind_le = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        if kind_le == SECTION_HEADER {
            let magic = &bytes[at + 8..at + 12];
            big = match u32::from_le_bytes(magic.try_into().unwrap()) {
                BYTE_ORDER_MAGIC => false,
                m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
                _ => bail!("corrupt section header at byte {at}: no byte-order magic"),
            };
            // Interfaces are numbered per section.
            cap.interfaces.clear();
        }
        let head = Fields {
            b: &bytes[at..at + 8],
            big,
        };
        let (kind, len) = (head.u32(0), head.u32(4) as usize);
        if len < 12 || len % 4 != 0 {
            bail!("corrupt block at byte {at}: length {len}");
        }
        if at + len > bytes.len() {
            bail!(
                "cut short at byte {at}: a block of {len} bytes, {} left in the file",
                bytes.len() - at
            );
        }
        let f = Fields {
            b: &bytes[at + 8..at + len - 4],
            big,
        };
        let body_len = f.b.len();
        match kind {
            INTERFACE_DESCRIPTION => {
                if body_len < 8 {
                    bail!("corrupt interface description at byte {at}");
                }
                let mut i = ReadInterface {
                    name: format!("interface {}", cap.interfaces.len()),
                    linktype: f.u16(0),
                    tsresol: 6,
                };
                for (code, v) in f.options(8) {
                    match code {
                        IF_NAME => i.name = String::from_utf8_lossy(v).into_owned(),
                        IF_TSRESOL if !v.is_empty() => i.tsresol = v[0],
                        _ => {}
                    }
                }
                cap.interfaces.push(i);
            }
            ENHANCED_PACKET => {
                if body_len < 20 {
                    bail!("corrupt packet block at byte {at}");
                }
                let interface = f.u32(0);
                let units = (u64::from(f.u32(4)) << 32) | u64::from(f.u32(8));
                let captured = f.u32(12) as usize;
                if 20 + captured > body_len {
                    bail!("corrupt packet block at byte {at}: {captured} bytes captured in a block of {len}");
                }
                let i = cap.interfaces.get(interface as usize).with_context(|| {
                    format!("corrupt packet block at byte {at}: interface {interface} was never described")
                })?;
                cap.packets.push(ReadPacket {
                    interface,
                    ts_ns: i.ns(units),
                    original_len: f.u32(16),
                    data: f.b[20..20 + captured].to_vec(),
                });
            }
            SIMPLE_PACKET => bail!(
                "simple packet blocks at byte {at} carry no timestamp: round trips cannot be read from them"
            ),
            _ => {}
        }
        at += len;
    }
    Ok(cap)
}

/// The IPv4 packet inside a frame of `linktype`, if it carries one.
pub fn ipv4_payload(linktype: u16, frame: &[u8]) -> Option<&[u8]> {
    match linktype {
        LINKTYPE_ETHERNET if frame.len() >= 14 && frame[12..14] == [0x08, 0x00] => {
            Some(&frame[14..])
        }
        LINKTYPE_RAW | LINKTYPE_IPV4 if frame.first()? >> 4 == 4 => Some(frame),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_interfaces() -> Vec<Interface> {
        ["a0", "b1"]
            .iter()
            .map(|n| Interface {
                name: n.to_string(),
                description: format!("{n}, the lab's"),
                snaplen: 128,
            })
            .collect()
    }

    #[test]
    fn what_is_written_reads_back_packet_for_packet() {
        let mut w = Writer::new(Vec::new(), "a test", &two_interfaces()).unwrap();
        let frames: [&[u8]; 3] = [&[1, 2, 3], &[4; 64], &[5; 5]];
        for (i, f) in frames.iter().enumerate() {
            let dir = if i % 2 == 0 {
                Direction::Outbound
            } else {
                Direction::Inbound
            };
            w.packet(
                i as u32 % 2,
                1_700_000_000_123_456_789 + i as u64,
                1514,
                f,
                dir,
            )
            .unwrap();
        }
        let written = w.written();
        let bytes = w.finish().unwrap();
        assert_eq!(written, bytes.len() as u64);
        let cap = read(&bytes).unwrap();
        assert_eq!(cap.interfaces.len(), 2);
        assert_eq!(cap.interfaces[1].name, "b1");
        assert_eq!(cap.interfaces[0].linktype, LINKTYPE_ETHERNET);
        assert_eq!(cap.packets.len(), 3);
        for (i, p) in cap.packets.iter().enumerate() {
            assert_eq!(p.data, frames[i]);
            assert_eq!(p.ts_ns, 1_700_000_000_123_456_789 + i as u64);
            assert_eq!((p.interface, p.original_len), (i as u32 % 2, 1514));
        }
        // The block's size is what the bound counts.
        let one = Writer::new(Vec::new(), "", &[]).unwrap().written();
        let mut w = Writer::new(Vec::new(), "", &two_interfaces()[..1]).unwrap();
        let before = w.written();
        w.packet(0, 0, 70, &[0; 70], Direction::Inbound).unwrap();
        assert!(one > 0);
        assert_eq!(
            w.written() - before,
            Writer::<Vec<u8>>::packet_block_len(70)
        );
    }

    #[test]
    fn timestamps_follow_the_interfaces_resolution() {
        let us = ReadInterface {
            name: String::new(),
            linktype: 1,
            tsresol: 6,
        };
        assert_eq!(us.ns(1_500_000), 1_500_000_000);
        let ps = ReadInterface {
            tsresol: 12,
            ..us.clone()
        };
        assert_eq!(ps.ns(3_000), 3);
        let pow2 = ReadInterface {
            tsresol: 0x80 | 10,
            ..us
        };
        assert_eq!(pow2.ns(1024), 1_000_000_000);
    }

    #[test]
    fn edge_cases_of_the_format_read_as_the_spec_says() {
        // Blocks built by hand in either byte order: a section, an
        // interface named "eth0" (its option fills the body to the byte,
        // no end-of-options), one packet.
        let file = |big: bool, idb_options: &[u8]| {
            let (u16b, u32b) = (
                |v: u16| {
                    if big {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    }
                },
                |v: u32| {
                    if big {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    }
                },
            );
            let block = |out: &mut Vec<u8>, kind: u32, body: &[u8]| {
                let len = 12 + body.len() as u32;
                out.extend(u32b(kind));
                out.extend(u32b(len));
                out.extend(body);
                out.extend(u32b(len));
            };
            let mut shb = u32b(BYTE_ORDER_MAGIC).to_vec();
            shb.extend(u16b(1));
            shb.extend(u16b(0));
            shb.extend((-1i64).to_le_bytes());
            let mut idb = u16b(LINKTYPE_ETHERNET).to_vec();
            idb.extend(u16b(0));
            idb.extend(u32b(128));
            idb.extend(idb_options);
            let mut epb = u32b(0).to_vec();
            for v in [0, 1_500, 4, 60] {
                epb.extend(u32b(v));
            }
            epb.extend([7; 4]);
            let mut out = Vec::new();
            block(&mut out, SECTION_HEADER, &shb);
            block(&mut out, INTERFACE_DESCRIPTION, &idb);
            block(&mut out, ENHANCED_PACKET, &epb);
            out
        };
        let name_option = |big: bool, len: u16| {
            let mut o = if big {
                IF_NAME.to_be_bytes()
            } else {
                IF_NAME.to_le_bytes()
            }
            .to_vec();
            o.extend(if big {
                len.to_be_bytes()
            } else {
                len.to_le_bytes()
            });
            o.extend(b"eth0");
            o
        };
        for big in [false, true] {
            let cap = read(&file(big, &name_option(big, 4))).unwrap();
            assert_eq!(cap.interfaces[0].name, "eth0", "big-endian {big}");
            assert_eq!(cap.interfaces[0].linktype, LINKTYPE_ETHERNET);
            // Microseconds by default: 1,500 us.
            assert_eq!(
                (cap.packets[0].ts_ns, cap.packets[0].original_len),
                (1_500_000, 60)
            );
            assert_eq!(cap.packets[0].data, [7; 4]);
            // An option that claims more than its block holds is left out.
            let cap = read(&file(big, &name_option(big, 100))).unwrap();
            assert_eq!(cap.interfaces[0].name, "interface 0");
        }
        // No options at all (the smallest interface description), and an
        // empty if_tsresol, which leaves the default.
        let mut empty_tsresol = IF_TSRESOL.to_le_bytes().to_vec();
        empty_tsresol.extend(0u16.to_le_bytes());
        for options in [&[][..], &empty_tsresol] {
            let cap = read(&file(false, options)).unwrap();
            assert_eq!(cap.interfaces[0].name, "interface 0");
            assert_eq!(cap.packets[0].ts_ns, 1_500_000);
        }
        // A packet that claims more captured bytes than its block holds.
        let mut f = file(false, &[]);
        let epb = f.len() - 12 - 24;
        f[epb + 8 + 12] = 25;
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("25 bytes captured"), "{e}");
        // An interface description of 4 bytes is corrupt.
        let f = file(false, &[]);
        let shb_len = u32::from_le_bytes(f[4..8].try_into().unwrap()) as usize;
        let mut short = f[..shb_len].to_vec();
        short.extend(INTERFACE_DESCRIPTION.to_le_bytes());
        short.extend(16u32.to_le_bytes());
        short.extend([1, 0, 0, 0]);
        short.extend(16u32.to_le_bytes());
        let e = read(&short).unwrap_err().to_string();
        assert!(e.contains("corrupt interface description"), "{e}");
        // An option 4 bytes longer than what is left, a section header with
        // no byte-order magic.
        let cap = read(&file(false, &name_option(false, 8))).unwrap();
        assert_eq!(cap.interfaces[0].name, "interface 0");
        let mut f = file(false, &[]);
        f[8..12].copy_from_slice(&[1, 2, 3, 4]);
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("no byte-order magic"), "{e}");
        // A packet block of 20 bytes holds an empty packet; of 16, none.
        let mut f = file(false, &[]);
        let epb = f.len() - 12 - 24;
        f.truncate(epb);
        for (len, fields) in [(32u32, [0u32, 0, 5, 0, 0]), (28, [0, 0, 5, 0, 0])] {
            let mut g = f.clone();
            g.extend(ENHANCED_PACKET.to_le_bytes());
            g.extend(len.to_le_bytes());
            for v in &fields[..(len as usize - 12) / 4] {
                g.extend(v.to_le_bytes());
            }
            g.extend(len.to_le_bytes());
            match read(&g) {
                Ok(cap) => assert!(len == 32 && cap.packets[0].data.is_empty()),
                Err(e) => assert!(
                    len == 28 && e.to_string().contains("corrupt packet block"),
                    "{e}"
                ),
            }
        }
        // A block of an unknown type, 12 bytes and empty, is passed over; 8
        // bytes after the last block are a block cut short.
        let mut f = file(false, &name_option(false, 4));
        f.extend(0xbadu32.to_le_bytes());
        f.extend(12u32.to_le_bytes());
        f.extend(12u32.to_le_bytes());
        assert_eq!(read(&f).unwrap().packets.len(), 1);
        f.extend([0; 8]);
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("8 bytes where a block needs 12"), "{e}");
        // A simple packet block has no timestamp to read.
        let mut f = file(false, &[]);
        f.extend(3u32.to_le_bytes());
        f.extend(16u32.to_le_bytes());
        f.extend(60u32.to_le_bytes());
        f.extend(16u32.to_le_bytes());
        let e = read(&f).unwrap_err().to_string();
        assert!(e.contains("carry no timestamp"), "{e}");
        // A section header's first four bytes alone, and fewer.
        let e = read(&SECTION_HEADER.to_le_bytes()).unwrap_err().to_string();
        assert!(e.contains("cut short at byte 0"), "{e}");
        let e = read(&[0x0a, 0x0d, 0x0d]).unwrap_err().to_string();
        assert!(e.contains("not a pcapng file"), "{e}");
    }

    #[test]
    fn bad_files_are_refused_saying_what_is_wrong() {
        let err = |b: &[u8]| read(b).unwrap_err().to_string();
        assert!(err(&[]).contains("empty"));
        assert!(err(&[0xd4, 0xc3, 0xb2, 0xa1, 0, 0]).contains("classic pcap"));
        let mut w = Writer::new(Vec::new(), "x", &two_interfaces()).unwrap();
        w.packet(1, 5, 60, &[7; 60], Direction::Outbound).unwrap();
        let good = w.finish().unwrap();
        let cut = &good[..good.len() - 10];
        assert!(err(cut).contains("cut short"), "{}", err(cut));
        let mut bad_len = good.clone();
        let last = good.len() - Writer::<Vec<u8>>::packet_block_len(60) as usize;
        bad_len[last + 4] = 13;
        assert!(err(&bad_len).contains("corrupt block"), "{}", err(&bad_len));
        bad_len[last + 4] = 8;
        assert!(err(&bad_len).contains("length 8"), "{}", err(&bad_len));
        // A packet of an interface never described.
        let mut orphan = good.clone();
        orphan[last + 8] = 9;
        assert!(err(&orphan).contains("never described"), "{}", err(&orphan));
    }

    #[test]
    fn ipv4_is_found_behind_ethernet_or_raw() {
        let mut eth = vec![0u8; 14];
        eth[12] = 0x08;
        eth.push(0x45);
        assert_eq!(ipv4_payload(LINKTYPE_ETHERNET, &eth), Some(&[0x45u8][..]));
        eth[13] = 0x06; // ARP
        assert_eq!(ipv4_payload(LINKTYPE_ETHERNET, &eth), None);
        assert_eq!(
            ipv4_payload(LINKTYPE_RAW, &[0x45, 0]),
            Some(&[0x45u8, 0][..])
        );
        assert_eq!(ipv4_payload(LINKTYPE_RAW, &[0x60, 0]), None);
        assert_eq!(ipv4_payload(113, &[0x45]), None);
    }
}
