//! The collectives transport: one shared-memory control segment per communicator and one
//! file per published payload, both under `/dev/shm` (the temporary directory where there is
//! no `/dev/shm`).
//!
//! The control segment (`devstream-comm-<name>`, mapped with `mmap(MAP_SHARED)`: this is why
//! the `comm` feature needs `libc`; `std` cannot map a file, and the only other use of `libc`
//! is none: liveness is read from `/proc`) holds a header, the verdicts and one slot per rank:
//!
//! ```text
//! header (4096 bytes): magic, version, nranks, abort word, where the failed step lies
//! verdicts[RING]: seq << 24 | deciding rank << 8 | outcome (0 agreed, else a failure code)
//! slot r: state (0 empty, 1 alive, 2 left), pid, process start time,
//!         posted (collectives posted, a prefix), done (collectives finished reading, a prefix),
//!         descriptors[RING]: seq, kind | reduction << 8 | type << 16 | group size << 24,
//!                            root, count
//!         p2p_sent[nranks] (messages sent to each peer), p2p_recvd[nranks]
//! ```
//!
//! Everything in it is an `AtomicU64`; ranks in one process map the file once each and share
//! pages with ranks in other processes through the page cache. Payloads go through plain files
//! (`write`/`pread`): collective `k` of rank `r` in `<segment>-c<k>-r<r>`, the `k`-th message
//! from `s` to `d` in `<segment>-p<s>-<d>-<k>`. A payload file is written completely before
//! the counter that announces it is stored (release), and once every reader is done it is
//! renamed into the writer's pool of spare files and reused (see `Pool`).
//!
//! **Descriptors and verdicts.** Rank `r` writes the descriptor of its collective `k` into its
//! ring entry `k % RING` before it announces `k` in `posted`; every rank compares the entries of
//! every rank for each of its collectives (all of a group's at once, see `comm_engine`), so a
//! peer that has already posted later collectives is compared too. The first rank to decide a
//! collective (agreed, or failed: ranks disagree, a peer left or died, the deadline) stores the
//! outcome in the verdict ring with a compare-and-swap, and every other rank adopts it: no rank
//! proceeds with a collective another rank failed. An entry is reused only `RING` collectives
//! later; a rank runs at most two steps (a call outside a group, or a group of at most
//! `MAX_STEP_SEQS` numbers) ahead of the slowest rank's comparisons, which `RING` covers with
//! room to spare. A reused entry read where an older one was expected is a loud transport
//! error, never a silent skip.

use devstream_core::{CommFailure, Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MAGIC: u64 = 0x6473_636f_6d6d_0001; // "dscomm" + 1
const VERSION: u64 = 2;
const HEADER: usize = 4096;

/// Entries in each rank's descriptor ring and in the verdict ring.
pub(crate) const RING: u64 = 512;
/// Sequence numbers one step (a call outside a group, or a group) takes at most: a quarter of
/// the ring (see the module docs).
pub(crate) const MAX_STEP_SEQS: u64 = RING / 4;
/// Words per descriptor entry: seq, descriptor, root, count.
const ENTRY_WORDS: usize = 4;
/// A descriptor entry's sequence word while it is being rewritten.
const WRITING: u64 = u64::MAX;

/// Slot states.
pub(crate) const EMPTY: u64 = 0;
pub(crate) const ALIVE: u64 = 1;
pub(crate) const LEFT: u64 = 2;

/// Word offsets inside a slot.
const STATE: usize = 0;
const PID: usize = 1;
const START: usize = 2;
const POSTED: usize = 3;
const DONE: usize = 4;
const ENTRIES: usize = 8;
const P2P: usize = ENTRIES + RING as usize * ENTRY_WORDS;

/// Header words.
const ABORT: usize = 3;
const FAILED_AT: usize = 4;

/// A collective's descriptor as the ranks compare it (`Collective::signature`).
pub(crate) type Entry = devstream_core::comm::Signature;

/// A descriptor entry as read.
pub(crate) enum EntryRead {
    Ready(Entry),
    /// The entry holds a later collective (or is being rewritten for one).
    Reused,
}

/// An outcome in the verdict ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Agreed,
    Failed(CommFailure),
}

/// A collective's verdict as read or decided.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Verdict {
    Open,
    Decided {
        outcome: Outcome,
        rank: usize,
    },
    /// The verdict entry holds a later collective's.
    Reused,
}

/// The directory that holds the segments and payload files: `DEVSTREAM_COMM_DIR` if set (every
/// rank must see the same one), else `/dev/shm`, else the temporary directory.
pub(crate) fn comm_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DEVSTREAM_COMM_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

pub(crate) fn transport(op: &'static str, what: impl std::fmt::Display) -> Error {
    Error::Comm {
        op,
        failure: CommFailure::Transport,
        reason: what.to_string(),
    }
}

/// A mapped control segment.
pub(crate) struct Segment {
    base: *mut u8,
    len: usize,
    nranks: usize,
    slot_words: usize,
    /// The segment's path (the prefix of its payload files).
    pub(crate) path: PathBuf,
    /// The segment file's device and inode: the same for every rank that mapped it, and unique
    /// among live segments (a mapping keeps its file, so the inode cannot be reused while any
    /// rank holds the segment). Ranks of one process find each other by it.
    pub(crate) file_id: (u64, u64),
}

// SAFETY: the mapping is only accessed through `AtomicU64`s (see `word`), which are `Sync`;
// the pointer is owned by the segment and unmapped once, in `Drop`.
unsafe impl Send for Segment {}
// SAFETY: as above: all shared access is atomic.
unsafe impl Sync for Segment {}

fn slot_words(nranks: usize) -> usize {
    // 8 fixed words, the descriptor ring, then sent and received counters per peer; a multiple
    // of 8 words (64 B).
    (P2P + 2 * nranks).div_ceil(8) * 8
}

/// Bytes before the first slot: the header and the verdict ring.
const SLOTS: usize = HEADER + RING as usize * 8;

fn segment_len(nranks: usize) -> usize {
    SLOTS + nranks * slot_words(nranks) * 8
}

impl Segment {
    /// Opens the segment at `path` for `nranks` ranks, creating it if no rank has yet.
    /// Creation is atomic: a rank writes a private file completely and hard-links it to the
    /// name, so another rank sees no segment or a complete one.
    pub(crate) fn open_or_create(path: &Path, nranks: usize) -> Result<Segment> {
        let op = "init";
        loop {
            match OpenOptions::new().read(true).write(true).open(path) {
                Ok(file) => return Segment::map(file, path, nranks),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(transport(op, format!("open {}: {e}", path.display()))),
            }
            static TMP: AtomicU64 = AtomicU64::new(0);
            let tmp = path.with_extension(format!(
                "tmp-{}-{}",
                std::process::id(),
                TMP.fetch_add(1, Ordering::Relaxed)
            ));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| transport(op, format!("create {}: {e}", tmp.display())))?;
            let made = (|| {
                file.set_len(segment_len(nranks) as u64)
                    .map_err(|e| transport(op, format!("size {}: {e}", tmp.display())))?;
                let segment = Segment::map_new(file, path, nranks)?;
                match std::fs::hard_link(&tmp, path) {
                    Ok(()) => Ok(Some(segment)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
                    Err(e) => Err(transport(op, format!("link {}: {e}", path.display()))),
                }
            })();
            let _ = std::fs::remove_file(&tmp);
            if let Some(segment) = made? {
                return Ok(segment);
            }
            // Another rank linked its segment first: open that one.
        }
    }

    /// Maps a fresh file and writes the header.
    fn map_new(file: File, path: &Path, nranks: usize) -> Result<Segment> {
        let segment = Segment::map_raw(&file, path, nranks, segment_len(nranks))?;
        segment.header(1).store(VERSION, Ordering::Relaxed);
        segment.header(2).store(nranks as u64, Ordering::Relaxed);
        segment.header(FAILED_AT).store(u64::MAX, Ordering::Relaxed);
        segment.header(0).store(MAGIC, Ordering::Release);
        Ok(segment)
    }

    /// Maps an existing segment and checks its header.
    fn map(file: File, path: &Path, nranks: usize) -> Result<Segment> {
        let len = file.metadata().map_err(|e| transport("init", e))?.len() as usize;
        if len < HEADER {
            return Err(transport(
                "init",
                format!("{} is truncated", path.display()),
            ));
        }
        let header = Segment::map_raw(&file, path, 0, HEADER)?;
        if header.header(0).load(Ordering::Acquire) != MAGIC
            || header.header(1).load(Ordering::Relaxed) != VERSION
        {
            return Err(transport(
                "init",
                format!("{} is not a devstream communicator", path.display()),
            ));
        }
        let theirs = header.header(2).load(Ordering::Relaxed) as usize;
        if theirs != nranks {
            return Err(Error::Comm {
                op: "init",
                failure: CommFailure::Mismatch,
                reason: format!("this rank says nranks = {nranks}, another said {theirs}"),
            });
        }
        drop(header);
        if len < segment_len(nranks) {
            return Err(transport(
                "init",
                format!("{} is truncated", path.display()),
            ));
        }
        Segment::map_raw(&file, path, nranks, segment_len(nranks))
    }

    /// The file's (device, inode), or zeros where it cannot be read.
    fn file_id(file: &File) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        file.metadata().map_or((0, 0), |m| (m.dev(), m.ino()))
    }

    fn map_raw(file: &File, path: &Path, nranks: usize, len: usize) -> Result<Segment> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared read-write mapping of `len` bytes of an open file the
        // caller made at least `len` long; the kernel picks the address. The file descriptor
        // may be closed afterwards (the mapping keeps the file).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(transport(
                "init",
                format!(
                    "mmap {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                ),
            ));
        }
        Ok(Segment {
            base: base.cast(),
            len,
            nranks,
            slot_words: slot_words(nranks),
            path: path.to_path_buf(),
            file_id: Segment::file_id(file),
        })
    }

    fn word(&self, offset_words: usize) -> &AtomicU64 {
        assert!(
            (offset_words + 1) * 8 <= self.len,
            "segment word out of range"
        );
        // SAFETY: the word lies inside the mapping (checked above), which is page aligned, so
        // the pointer is 8-byte aligned; the mapping lives as long as `self`, and every access
        // to the segment, in every process, is through `AtomicU64`.
        unsafe { &*self.base.add(offset_words * 8).cast::<AtomicU64>() }
    }

    fn header(&self, index: usize) -> &AtomicU64 {
        self.word(index)
    }

    fn slot(&self, rank: usize, index: usize) -> &AtomicU64 {
        debug_assert!(rank < self.nranks);
        self.word(SLOTS / 8 + rank * self.slot_words + index)
    }

    /// The abort word: 0 while healthy, else `failure code << 32 | (rank + 1)`.
    pub(crate) fn abort_word(&self) -> u64 {
        self.header(ABORT).load(Ordering::SeqCst)
    }

    /// Where the earliest failed step (a call outside a group, or a group) lies, once the abort
    /// word is set: the first collective number it takes or would take. Steps at or before it
    /// go on (a rank behind its peers still reaches the failed step and learns its verdict),
    /// later ones fail at once.
    pub(crate) fn failed_at(&self) -> u64 {
        self.header(FAILED_AT).load(Ordering::SeqCst)
    }

    /// Marks the communicator failed at the step at `base` (the first failure's word wins; the
    /// step kept is the earliest).
    pub(crate) fn abort(&self, rank: usize, failure: CommFailure, base: u64) {
        self.header(FAILED_AT).fetch_min(base, Ordering::SeqCst);
        let word = (failure_code(failure) << 32) | (rank as u64 + 1);
        let _ = self
            .header(ABORT)
            .compare_exchange(0, word, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Writes `rank`'s descriptor of collective `seq` (before `seq` is announced in `posted`).
    pub(crate) fn write_entry(&self, rank: usize, seq: u64, entry: Entry) {
        let base = ENTRIES + (seq % RING) as usize * ENTRY_WORDS;
        // A seqlock: readers that see `seq` before and after reading the words read them whole.
        self.slot(rank, base).store(WRITING, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        self.slot(rank, base + 1)
            .store(entry.desc, Ordering::Relaxed);
        self.slot(rank, base + 2)
            .store(entry.root, Ordering::Relaxed);
        self.slot(rank, base + 3)
            .store(entry.count, Ordering::Relaxed);
        self.slot(rank, base).store(seq, Ordering::Release);
    }

    /// `rank`'s descriptor of collective `seq`, which `rank` has announced (`posted >= seq`).
    pub(crate) fn entry(&self, rank: usize, seq: u64) -> EntryRead {
        let base = ENTRIES + (seq % RING) as usize * ENTRY_WORDS;
        if self.slot(rank, base).load(Ordering::Acquire) != seq {
            return EntryRead::Reused;
        }
        let entry = Entry {
            desc: self.slot(rank, base + 1).load(Ordering::Relaxed),
            root: self.slot(rank, base + 2).load(Ordering::Relaxed),
            count: self.slot(rank, base + 3).load(Ordering::Relaxed),
        };
        std::sync::atomic::fence(Ordering::Acquire);
        if self.slot(rank, base).load(Ordering::Relaxed) != seq {
            return EntryRead::Reused;
        }
        EntryRead::Ready(entry)
    }

    fn verdict_word(&self, seq: u64) -> &AtomicU64 {
        self.word(HEADER / 8 + (seq % RING) as usize)
    }

    /// The verdict of the collective (or group) whose first sequence number is `seq`.
    pub(crate) fn verdict(&self, seq: u64) -> Verdict {
        read_verdict(self.verdict_word(seq).load(Ordering::SeqCst), seq)
    }

    /// Decides the collective (or group) whose first sequence number is `seq`, unless a rank
    /// did already: the verdict that holds.
    pub(crate) fn decide(&self, seq: u64, rank: usize, outcome: Outcome) -> Verdict {
        let code = match outcome {
            Outcome::Agreed => 0,
            Outcome::Failed(failure) => failure_code(failure),
        };
        let word = ((seq & VERDICT_SEQ_MASK) << 24) | ((rank.min(0xffff) as u64) << 8) | code;
        let slot = self.verdict_word(seq);
        let mut current = slot.load(Ordering::SeqCst);
        loop {
            match read_verdict(current, seq) {
                Verdict::Open => {}
                decided => return decided,
            }
            match slot.compare_exchange(current, word, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return read_verdict(word, seq),
                Err(now) => current = now,
            }
        }
    }

    pub(crate) fn state(&self, rank: usize) -> &AtomicU64 {
        self.slot(rank, STATE)
    }
    pub(crate) fn pid(&self, rank: usize) -> &AtomicU64 {
        self.slot(rank, PID)
    }
    pub(crate) fn start_time(&self, rank: usize) -> &AtomicU64 {
        self.slot(rank, START)
    }
    pub(crate) fn posted(&self, rank: usize) -> &AtomicU64 {
        self.slot(rank, POSTED)
    }
    pub(crate) fn done(&self, rank: usize) -> &AtomicU64 {
        self.slot(rank, DONE)
    }
    /// Messages `rank` has sent to `peer`.
    pub(crate) fn sent(&self, rank: usize, peer: usize) -> &AtomicU64 {
        self.slot(rank, P2P + peer)
    }
    /// Messages `rank` has received from `peer`.
    pub(crate) fn received(&self, rank: usize, peer: usize) -> &AtomicU64 {
        self.slot(rank, P2P + self.nranks + peer)
    }

    /// The payload file of collective `seq` of `rank`.
    pub(crate) fn coll_path(&self, seq: u64, rank: usize) -> PathBuf {
        suffixed(&self.path, &format!("-c{seq}-r{rank}"))
    }

    /// The payload file of message `seq` from `src` to `dst`.
    pub(crate) fn p2p_path(&self, src: usize, dst: usize, seq: u64) -> PathBuf {
        suffixed(&self.path, &format!("-p{src}-{dst}-{seq}"))
    }

    /// Removes every payload file of this communicator (when every rank has left).
    pub(crate) fn sweep(&self) {
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return;
        };
        let prefix = format!("{}-", name.to_string_lossy());
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }

    /// Whether `rank` is gone: left, or its process no longer runs.
    pub(crate) fn peer_gone(&self, rank: usize) -> Option<CommFailure> {
        match self.state(rank).load(Ordering::Acquire) {
            LEFT => Some(CommFailure::PeerLeft),
            ALIVE => {
                let pid = self.pid(rank).load(Ordering::Relaxed) as u32;
                let start = self.start_time(rank).load(Ordering::Relaxed);
                (!process_alive(pid, start)).then_some(CommFailure::PeerDied)
            }
            _ => None,
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `map_raw`, unmapped only here; no
        // reference into it outlives `self` (all borrow `self`).
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// Sequence numbers kept in a verdict word (2^40: far more collectives than a communicator runs).
const VERDICT_SEQ_MASK: u64 = (1 << 40) - 1;

fn read_verdict(word: u64, seq: u64) -> Verdict {
    let theirs = word >> 24;
    let seq = seq & VERDICT_SEQ_MASK;
    if theirs < seq {
        // An older collective's (or none yet): this one is undecided.
        return Verdict::Open;
    }
    if theirs > seq {
        return Verdict::Reused;
    }
    let rank = ((word >> 8) & 0xffff) as usize;
    let outcome = match word & 0xff {
        0 => Outcome::Agreed,
        code => Outcome::Failed(failure_of(code)),
    };
    Verdict::Decided { outcome, rank }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

pub(crate) fn failure_code(failure: CommFailure) -> u64 {
    match failure {
        CommFailure::PeerDied => 1,
        CommFailure::PeerLeft => 2,
        CommFailure::Timeout => 3,
        CommFailure::Mismatch => 4,
        CommFailure::Aborted => 5,
        _ => 6,
    }
}

pub(crate) fn failure_of(code: u64) -> CommFailure {
    match code {
        1 => CommFailure::PeerDied,
        2 => CommFailure::PeerLeft,
        3 => CommFailure::Timeout,
        4 => CommFailure::Mismatch,
        5 => CommFailure::Aborted,
        _ => CommFailure::Transport,
    }
}

/// `(state, start time)` of a process from `/proc/<pid>/stat`; `None` if there is none.
pub(crate) fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": the command may hold spaces and parentheses; fields after the
    // last ')' are space separated: state is the first, start time the 20th.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// The start time of this process (0 where `/proc` is missing).
pub(crate) fn own_start_time() -> u64 {
    proc_stat(std::process::id()).map_or(0, |(_, start)| start)
}

/// Whether process `pid` started at `start` still runs (a zombie or a reused pid is dead).
/// Without `/proc` every process counts as alive (the deadline still applies).
pub(crate) fn process_alive(pid: u32, start: u64) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if !Path::new("/proc/self/stat").exists() {
        return true;
    }
    match proc_stat(pid) {
        None => false,
        Some((state, started)) => !matches!(state, 'Z' | 'X' | 'x') && started == start,
    }
}

/// Payload files of one rank that readers are done with, kept for reuse: publishing into a
/// recycled file rewrites pages the page cache already holds instead of allocating (and
/// zeroing, and later freeing) new ones.
pub(crate) struct Pool {
    free: std::sync::Mutex<Vec<PathBuf>>,
    closed: std::sync::atomic::AtomicBool,
    next: AtomicU64,
    prefix: PathBuf,
}

/// Files a rank keeps for reuse.
const POOLED: usize = 4;

impl Pool {
    pub(crate) fn new(segment: &Path, rank: usize) -> Pool {
        Pool {
            free: std::sync::Mutex::new(Vec::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
            next: AtomicU64::new(0),
            prefix: suffixed(segment, &format!("-free-r{rank}-")),
        }
    }

    /// Takes back a file its readers are done with (or removes it).
    pub(crate) fn recycle(&self, path: &Path) {
        let mut free = crate::lock(&self.free);
        if free.len() < POOLED && !self.closed.load(Ordering::Acquire) {
            let spare = suffixed(
                &self.prefix,
                &self.next.fetch_add(1, Ordering::Relaxed).to_string(),
            );
            if std::fs::rename(path, &spare).is_ok() {
                free.push(spare);
            }
            return;
        }
        drop(free);
        let _ = std::fs::remove_file(path);
    }

    /// Removes the kept files; later recycled files are removed at once.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for path in crate::lock(&self.free).drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Writes `chunks` (in order, from byte 0) as the file `path`: a recycled file renamed to
    /// `path` where there is one (it may be longer: readers read only what they were told),
    /// else a new file.
    pub(crate) fn publish(&self, op: &'static str, path: &Path, chunks: &[&[u8]]) -> Result<()> {
        let spare = crate::lock(&self.free).pop();
        let reused = spare.is_some_and(|spare| std::fs::rename(&spare, path).is_ok());
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!reused)
            .open(path)
            .map_err(|e| transport(op, format!("create {}: {e}", path.display())))?;
        for chunk in chunks {
            file.write_all(chunk)
                .map_err(|e| transport(op, format!("write {}: {e}", path.display())))?;
        }
        Ok(())
    }
}

/// An open payload file.
pub(crate) struct Payload {
    file: File,
    path: PathBuf,
}

impl Payload {
    pub(crate) fn open(op: &'static str, path: &Path) -> Result<Payload> {
        let file =
            File::open(path).map_err(|e| transport(op, format!("open {}: {e}", path.display())))?;
        Ok(Payload {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Fills `out` from byte `offset`.
    pub(crate) fn read_at(&self, op: &'static str, offset: usize, out: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(out, offset as u64)
            .map_err(|e| transport(op, format!("read {}: {e}", self.path.display())))
    }
}

/// Polls `ready` until it answers, with a backoff from yields to 1 ms sleeps.
pub(crate) fn poll_until<T>(deadline: Instant, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let mut round = 0u32;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        if round < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(
                (20u64 << ((round - 64) / 16).min(6)).min(1000),
            ));
        }
        round += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(tag: &str) -> (Segment, PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "devstream-comm-shm-test-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        (Segment::open_or_create(&path, 2).unwrap(), path)
    }

    #[test]
    fn a_reused_descriptor_entry_reads_as_reused_never_as_the_later_collective() {
        let (seg, path) = segment("entries");
        let first = Entry {
            desc: 1,
            root: 0,
            count: 7,
        };
        let later = Entry { count: 9, ..first };
        seg.write_entry(1, 5, first);
        assert!(matches!(seg.entry(1, 5), EntryRead::Ready(e) if e == first));
        seg.write_entry(1, 5 + RING, later);
        assert!(matches!(seg.entry(1, 5), EntryRead::Reused));
        assert!(matches!(seg.entry(1, 5 + RING), EntryRead::Ready(e) if e == later));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn the_first_verdict_holds_and_a_reused_one_is_reported() {
        let (seg, path) = segment("verdicts");
        assert!(matches!(seg.verdict(3), Verdict::Open));
        let mismatch = Outcome::Failed(CommFailure::Mismatch);
        assert!(matches!(
            seg.decide(3, 1, mismatch),
            Verdict::Decided { outcome, rank: 1 } if outcome == mismatch
        ));
        // A later proposal adopts the verdict that holds.
        assert!(matches!(
            seg.decide(3, 0, Outcome::Agreed),
            Verdict::Decided { outcome, rank: 1 } if outcome == mismatch
        ));
        seg.decide(3 + RING, 0, Outcome::Agreed);
        assert!(matches!(seg.verdict(3), Verdict::Reused));
        assert!(matches!(
            seg.verdict(3 + RING),
            Verdict::Decided {
                outcome: Outcome::Agreed,
                rank: 0
            }
        ));
        let _ = std::fs::remove_file(path);
    }
}
