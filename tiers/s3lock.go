package tiers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// A lock on an object tier is an object under .gguftool/locks/ holding
// its holder and the time its lease ends: the exclusive lock is
// <name>.lock, created with If-None-Match: * so that of two hosts only
// one gets it; each shared holder writes <name>.shared-<holder>. Each
// side writes its own object first and then looks for the other's, so
// two cannot both proceed. A holder renews its lease every third of
// its length; a lock whose lease has ended (its holder crashed or lost
// the network) is taken over with a write conditional on its ETag, so
// two hosts cannot both take over the same stale lock.
//
// A holder also records which boot of which machine it runs on, its pid
// namespace and when its process started: a lock left by a process of
// this machine that is gone (a crash, a SIGKILL) is taken over at once
// instead of after its lease, since that process cannot renew it.
type lockRecord struct {
	Holder    string `json:"holder"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	Boot      string `json:"boot_id,omitempty"`
	PidNS     string `json:"pid_ns,omitempty"`
	Start     int64  `json:"pid_start,omitempty"`
	Exclusive bool   `json:"exclusive"`
	Expires   int64  `json:"expires_unix_ms"`
}

func (s *objectStore) lockKey(name string) string {
	return s.loc.key(StateDir + "/locks/" + url.PathEscape(name) + ".lock")
}

func (s *objectStore) sharedPrefix(name string) string {
	return s.loc.key(StateDir + "/locks/" + url.PathEscape(name) + ".shared-")
}

func newHolder() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *objectStore) record(holder string, exclusive bool) lockRecord {
	host, _ := os.Hostname()
	boot, ns := thisMachine()
	pid := os.Getpid()
	return lockRecord{Holder: holder, Host: host, PID: pid, Boot: boot, PidNS: ns, Start: processStart(pid),
		Exclusive: exclusive, Expires: time.Now().Add(s.opts.leaseTTL()).UnixMilli()}
}

// putLock writes a lock object: create-only when match is "", else only
// over the version whose ETag is match. It returns the new ETag.
func (s *objectStore) putLock(ctx context.Context, key string, r lockRecord, match string, create bool) (string, error) {
	data, _ := json.Marshal(r)
	opts := minio.PutObjectOptions{ContentType: "application/json", DisableContentSha256: true}
	switch {
	case create:
		opts.SetMatchETagExcept("*")
	case match != "":
		opts.SetMatchETag(match)
	}
	info, err := s.core.PutObject(ctx, s.loc.Bucket, key, bytes.NewReader(data), int64(len(data)), "", "", opts)
	if err != nil {
		return "", err
	}
	return trimQuotes(info.ETag), nil
}

// readLock reads a lock object and its ETag.
func (s *objectStore) readLock(ctx context.Context, key string) (lockRecord, string, error) {
	body, info, _, err := s.core.GetObject(ctx, s.loc.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return lockRecord{}, "", err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil {
		return lockRecord{}, "", err
	}
	var r lockRecord
	if err := json.Unmarshal(data, &r); err != nil {
		// Not ours, or damaged: treated as held until it expires by age.
		r = lockRecord{Holder: "unreadable", Expires: info.LastModified.Add(s.opts.leaseTTL()).UnixMilli()}
	}
	return r, trimQuotes(info.ETag), nil
}

// live reports whether the lock still holds: its lease has not ended,
// and its holder is not a process of this machine that is gone.
func (r lockRecord) live(now time.Time) bool { return now.UnixMilli() < r.Expires && !r.orphaned() }

// orphaned reports whether the holder is a process of this machine (the
// same host name, boot and pid namespace) that no longer runs: its pid
// is free, or taken by a process that started later.
func (r lockRecord) orphaned() bool {
	host, _ := os.Hostname()
	boot, ns := thisMachine()
	if r.Host != host || r.Boot != boot || r.PidNS != ns || r.PID <= 0 {
		return false
	}
	if processGone(r.PID) {
		return true
	}
	return r.Start != 0 && processStart(r.PID) != r.Start
}

func (r lockRecord) String() string {
	return fmt.Sprintf("held by %s pid %d, lease until %s", r.Host, r.PID, time.UnixMilli(r.Expires).UTC().Format(time.RFC3339))
}

// lock takes the artifact's lock on the tier without waiting; a live
// holder's lock is ErrBusy naming it. The returned function stops the
// renewal and deletes the lock object.
func (s *objectStore) lock(ctx context.Context, name string, exclusive bool) (func(), error) {
	holder := newHolder()
	rec := s.record(holder, exclusive)
	busy := func(why string) error {
		return &BusyError{Artifact: name, Tier: s.tier.Name, Reason: why}
	}
	key := s.lockKey(name)
	if !exclusive {
		key = s.sharedPrefix(name) + holder
	}
	etag, err := s.putLock(ctx, key, rec, "", exclusive)
	if exclusive && isPrecondition(err) {
		etag, err = s.takeOver(ctx, key, rec)
		if err != nil {
			return nil, err
		}
		if etag == "" {
			cur, _, _ := s.readLock(ctx, key)
			return nil, busy("another operation holds its lock object (" + cur.String() + ")")
		}
	} else if err != nil {
		return nil, fmt.Errorf("tiers: taking the lock on %s in tier %s: %w", name, s.tier.Name, err)
	}
	release := s.keepAlive(key, rec, etag)
	if clash, why := s.otherSide(ctx, name, exclusive); clash {
		release()
		return nil, busy(why)
	}
	return release, nil
}

// takeOver replaces an expired exclusive lock with ours; "" when it is
// still live (or another host took it over first).
func (s *objectStore) takeOver(ctx context.Context, key string, rec lockRecord) (string, error) {
	cur, etag, err := s.readLock(ctx, key)
	if isNotFound(err) {
		etag, err := s.putLock(ctx, key, rec, "", true) // released meanwhile
		if isPrecondition(err) {
			return "", nil
		}
		return etag, err
	}
	if err != nil {
		return "", err
	}
	if cur.live(time.Now()) {
		return "", nil
	}
	newTag, err := s.putLock(ctx, key, rec, etag, false)
	if isPrecondition(err) {
		return "", nil
	}
	return newTag, err
}

// otherSide looks, after our own lock object is written, for a live lock
// of the other kind: shared holders for an exclusive lock, the exclusive
// lock for a shared one.
func (s *objectStore) otherSide(ctx context.Context, name string, exclusive bool) (bool, string) {
	now := time.Now()
	if !exclusive {
		cur, _, err := s.readLock(ctx, s.lockKey(name))
		if err == nil && cur.live(now) {
			return true, "an operation holds its lock object (" + cur.String() + ")"
		}
		return false, ""
	}
	for o := range s.core.Client.ListObjects(ctx, s.loc.Bucket, minio.ListObjectsOptions{Prefix: s.sharedPrefix(name)}) {
		if o.Err != nil {
			return true, "its shared locks could not be listed: " + o.Err.Error()
		}
		cur, _, err := s.readLock(ctx, o.Key)
		if err == nil && cur.live(now) {
			return true, "a reader holds a shared lock on it (" + cur.String() + ")"
		}
	}
	return false, ""
}

// keepAlive renews the lease until the returned function is called,
// which deletes the lock object.
func (s *objectStore) keepAlive(key string, rec lockRecord, etag string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(s.opts.leaseTTL()/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rec.Expires = time.Now().Add(s.opts.leaseTTL()).UnixMilli()
				ctx, cancel := context.WithTimeout(context.Background(), s.opts.leaseTTL()/3+time.Second)
				if e, err := s.putLock(ctx, key, rec, etag, false); err == nil {
					etag = e
				}
				cancel()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.core.Client.RemoveObject(ctx, s.loc.Bucket, key, minio.RemoveObjectOptions{})
	}
}

// objectState is an object tier's .gguftool/state.json: digests verified
// by reading the objects back, each with the ETag and size it was read
// under (the object-store counterpart of a file's inode and times).
func (s *objectStore) stateKey() string { return s.loc.key(StateDir + "/state.json") }

// readState reads the tier's state and its ETag ("" when there is none).
func (s *objectStore) readState(ctx context.Context) (*tierState, string, error) {
	st := &tierState{Digests: map[string]DigestEntry{}, LastUse: map[string]int64{}}
	body, info, _, err := s.core.GetObject(ctx, s.loc.Bucket, s.stateKey(), minio.GetObjectOptions{})
	if isNotFound(err) {
		return st, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("tiers: reading %s: %w", s.where(StateDir+"/state.json"), err)
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, 256<<20))
	if err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, "", &StateError{File: s.where(StateDir + "/state.json"), Msg: "invalid JSON: " + err.Error()}
	}
	if st.Digests == nil {
		st.Digests = map[string]DigestEntry{}
	}
	if st.LastUse == nil {
		st.LastUse = map[string]int64{}
	}
	return st, trimQuotes(info.ETag), nil
}

// withState reads, changes and rewrites the state, conditional on the
// version read, trying again when another writer got there first.
func (s *objectStore) withState(ctx context.Context, change func(*tierState) error) error {
	for attempt := 0; ; attempt++ {
		st, etag, err := s.readState(ctx)
		if err != nil {
			return err
		}
		if err := change(st); err != nil {
			return err
		}
		data, err := json.MarshalIndent(st, "", " ")
		if err != nil {
			return err
		}
		opts := minio.PutObjectOptions{ContentType: "application/json", DisableContentSha256: true}
		if etag == "" {
			opts.SetMatchETagExcept("*")
		} else {
			opts.SetMatchETag(etag)
		}
		_, err = s.core.PutObject(ctx, s.loc.Bucket, s.stateKey(), bytes.NewReader(data), int64(len(data)), "", "", opts)
		if err == nil {
			return nil
		}
		if !isPrecondition(err) || attempt == 20 {
			return fmt.Errorf("tiers: writing %s: %w", s.where(StateDir+"/state.json"), err)
		}
		time.Sleep(time.Duration(10+attempt*10) * time.Millisecond)
	}
}

// recordDigests stores digests verified by reading the objects back,
// with the ETag and size each was read under.
func (s *objectStore) recordDigests(ctx context.Context, read map[string]Stamp, digests map[string]Digest, now time.Time) error {
	return s.withState(ctx, func(st *tierState) error {
		for rel, d := range digests {
			o, ok := read[rel]
			if !ok || o.ETag == "" {
				return fmt.Errorf("tiers: recording %s: the object's ETag as it was read back is not known", s.where(rel))
			}
			st.Digests[rel] = DigestEntry{Stamp: o, XXH3: d, Verified: now.Unix()}
		}
		return nil
	})
}

// forget drops an artifact's digests from the state.
func (s *objectStore) forget(ctx context.Context, a *Artifact) error {
	return s.withState(ctx, func(st *tierState) error {
		for _, f := range a.Files {
			delete(st.Digests, f.Rel)
		}
		delete(st.LastUse, a.Name)
		return nil
	})
}

// hiddenKey reports whether a key relative to the prefix is gguftool's.
func hiddenKey(rel string) bool { return hiddenState(strings.SplitN(rel, "/", 2)[0]) }
