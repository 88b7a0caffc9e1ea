// Package tiers moves models between storage tiers without ever losing
// one.
//
// A tier is a named directory (its root), or a prefix of a bucket on an
// S3-compatible server (an object tier, s3.go), with a role — hot, warm
// or cold, colder meaning slower and cheaper — and an optional byte
// budget. What
// tiers move are artifacts: a pack directory, a GGUF file, or a GGUF split
// set, named by their path relative to the root. A Manager runs the
// operations: Migrate (move an artifact to another tier), EnsureHot (copy
// it onto the hot tier, evicting first when that tier lacks room), Evict
// (free room on a tier by moving its least-recently-used artifacts onto
// verified twins on colder tiers, or to a tier named for it), Scrub
// (re-read copies and compare them with their recorded digests) and
// Recover (settle operations a crash interrupted). A server holds a Lease
// on the artifact it serves, so nothing moves it meanwhile.
//
// Each tier keeps its own records under .gguftool/ at its root, so they
// travel with the disk: state.json (each file's XXH3-128 with the stat it
// was read under, and each artifact's last use), journal/<id>.json (one
// write-ahead record per unfinished operation, kept in the destination
// tier) and locks/ (flock(2) files: exclusive for an operation, in both
// tiers it touches; shared for a lease). docs/format/storage-tiers.md
// specifies these files, the journal's steps and what recovery does at
// each.
//
// # The invariant
//
// An artifact is never below one complete copy whose content is verified:
// the source stays until a copy on another tier has been verified by
// content. A new copy is re-read from the disk and its XXH3-128 compared
// with the source's, taken from the bytes the copy read (or re-read after
// a crash); a twin already on the destination is re-read along with the
// source. Recorded digests stand in only with AllowCachedDigests, only
// where both copies' records agree, and only while every file's device,
// inode, size, mtime and ctime are unchanged. A copy is written under
// temporary names, fsynced at checkpoints, verified, and only then
// published by a rename and a directory fsync; each step is recorded in
// the journal before the next begins. An operation resumed after its
// verification re-reads the destination against the journal's digests
// before dropping anything, and rolls back when the copy no longer matches
// (or, when the source is not whole either, stops and keeps its record for
// a person). A copy that is not really a copy — a symlink, a hard link or
// a path that resolves to the original, a truncated or empty file, one
// whose bytes differ, one being written while it is read — is refused,
// naming the file.
//
// A tier's records are also witnesses (witness.go): while a file keeps
// the storage it was verified in (its device and inode, an object's
// ETag), bytes or a size that contradict its record are damage, and so is
// a recorded file gone from an artifact whose other files are unchanged.
// Nothing read from a damaged source is published: its copy is rolled
// back at once, never left for a resume that would take it for whole. An
// object is also checked against the digest its upload put in its
// metadata whenever it is read back, so no verification records a
// damaged object's content. Before a move drops its source, each source
// file is compared with what it was when its digest was taken (the
// journal's source_stat): one written since is read again, and a source
// that changed after it was copied rolls the copy back instead of being
// dropped.
//
// # How the tests prove it
//
// The engine's file operations go through FS, its locks through Locker and
// its reads for hashing through Hasher, so the tests can run it over
// MemFS, which keeps a file's bytes only as of its last Sync and a
// directory's entries only as of its last SyncDir, and forgets everything
// else at Crash, as a power cut would. TestCrashAtEveryStep runs migrate
// (a pack, a split set, onto an existing twin), ensure-hot with eviction,
// and evict, and crashes each at every file-system call that can change
// something (each open for writing, write, truncate, fsync, rename,
// removal, mkdir and directory fsync), drops the unsynced writes, and
// recovers in every mode (finish, roll back, leave for later): every
// artifact must still have a complete copy matching its original digests
// and be where it was or where the operation puts it; no temporary file or
// record may be left once recovery finished or rolled back; and running
// the operation again must complete it. TestSIGKILL runs the same
// operations in child processes on a real disk, with flock locks and the
// I/O engine's hasher, SIGKILLs them at every journal step and at random
// moments of their copies (paced so that a random moment is a random byte
// offset; at least half of these must land part way through a copy),
// recovers, alternately finishing and rolling back, and checks the same.
// TestRecoverReverifies, TestRecoverRollbackCrashes and
// TestRecoverKeepsBothHalves rot a verified copy while its operation waits
// for recovery, and check that recovery drops nothing onto it.
// TestMigrateOntoNonTwin and TestCopyVerifyMismatch refuse copies with a
// flipped byte or a wrong size. The refusal tests of package twins
// (TestRefusals, TestSymlinkedDirectory, TestConcurrentWrite) drive
// ArtifactAt, CheckStructure and VerifyContent over copies that are
// truncated, truncated then extended, preallocated with other bytes,
// flipped, symlinked, hard-linked, empty, missing a shard or being
// written, and accept a sparse copy with identical content.
//
// TestDirectoryDamageNeverComesBack and TestS3DamageNeverComesBack rot,
// truncate and delete a file of each kind of artifact on a cold tier (a
// MemFS directory, whose rot changes bytes and not the stat, and a real
// bucket), then try ensure-hot twice, recover and a move back: none may
// publish it or leave anything behind, and scrub must name it; the
// Resume variants damage the source part way through an interrupted
// copy. TestSourceChangedDuringMove edits a move's source as its object
// completes and after its verification, and ends the move in the same
// process, by migrate and by recover: the edit is never lost.
// TestS3VerifyNeverRecordsDamage checks that a twin verification fails
// on a damaged object instead of recording it; TestForgetAcceptsAChange
// that forgetting a record is how a person accepts a change;
// TestS3LockOfAGoneProcess that a lock left by a dead process of this
// machine is taken over at once, which TestS3SIGKILL relies on (its
// leases outlast the test).
//
// The object tiers are tested against a real S3 server (versitygw,
// started by package s3test): TestS3RoundTrip moves a pack, a GGUF and a
// split set onto a bucket and back byte for byte; TestS3Faults cuts the
// server off mid-upload, injects 500s on parts and a server too slow to
// answer (through a proxy in front of the real one), and flips, truncates
// and deletes objects behind its back; TestS3Locks races eight hosts for
// one lock object and lets a crashed holder's lease run out; TestS3SIGKILL
// kills an upload at every journal step and at random moments, and
// recovers; TestS3CredentialChain takes the keys from the environment and
// from a shared file's profile, and refuses wrong or missing keys naming
// where they came from, never the secret.
//
// FuzzConfig and FuzzJournal feed arbitrary bytes to the configuration
// and journal parsers: an input either parses into a record that survives a round trip
// (a journal's paths all inside its tier) or is refused with an error
// naming the file; FuzzObjectURL and FuzzListing do the same for an
// s3:// URL and for the keys a server lists.
package tiers
