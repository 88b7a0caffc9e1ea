package tiers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// S3Location is a tier that is a prefix of a bucket on an S3-compatible
// server. Credentials never appear here: they come from the standard AWS
// chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
// shared files, the instance role).
type S3Location struct {
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix,omitempty"`
	Region   string `json:"region,omitempty"`
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// check refuses a location no S3 server could serve, or one whose prefix
// could climb out of itself.
func (l *S3Location) check() error {
	u, err := url.Parse(l.Endpoint)
	switch {
	case err != nil:
		return fmt.Errorf("endpoint %q: %v", l.Endpoint, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("endpoint %q must start with http:// or https://", l.Endpoint)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("endpoint %q must be scheme://host[:port] with no path, credentials or query", l.Endpoint)
	case !bucketName.MatchString(l.Bucket) || strings.Contains(l.Bucket, ".."):
		return fmt.Errorf("bucket %q is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens)", l.Bucket)
	case l.Prefix != "" && (!strings.HasSuffix(l.Prefix, "/") || checkRel(strings.TrimSuffix(l.Prefix, "/")) != nil || len(l.Prefix) > 512):
		return fmt.Errorf("prefix %q must be empty or a clean relative path ending in /", l.Prefix)
	}
	return nil
}

// URL is s3://bucket/prefix.
func (l *S3Location) URL() string { return "s3://" + l.Bucket + "/" + l.Prefix }

// key is the object key of a path relative to the tier.
func (l *S3Location) key(rel string) string { return l.Prefix + rel }

// S3Options tune the object tiers' transfers; zero values take the
// defaults.
type S3Options struct {
	// PartSize is the multipart part size; 0 picks it from the object's
	// size (at least 16 MiB, and at most 9,000 parts).
	PartSize int64
	// Parallel is the parts (and ranged reads) in flight per file:
	// memory is bounded by Parallel × PartSize whatever the artifact's
	// size.
	Parallel int
	// Timeout bounds the wait for a response's headers; a server slower
	// than that fails the request (after MaxRetries).
	Timeout time.Duration
	// MaxRetries is how many times a failed request is tried (default 3).
	MaxRetries int
	// LeaseTTL is how long a lock object holds without renewal: a crashed
	// holder's lock expires after it (default 2 minutes).
	LeaseTTL time.Duration
}

const (
	minPartSize     = 16 << 20
	maxParts        = 9000
	defaultParallel = 4
)

func (o S3Options) parallel() int {
	if o.Parallel > 0 {
		return o.Parallel
	}
	return defaultParallel
}

func (o S3Options) leaseTTL() time.Duration {
	if o.LeaseTTL > 0 {
		return o.LeaseTTL
	}
	return 2 * time.Minute
}

// partSize is the part size for an object of size bytes: the configured
// one, else 16 MiB grown in whole MiB so no upload needs more than 9,000
// parts (S3 allows 10,000).
func (o S3Options) partSize(size int64) int64 {
	if o.PartSize > 0 {
		return o.PartSize
	}
	p := int64(minPartSize)
	if need := (size + maxParts - 1) / maxParts; need > p {
		p = (need + 1<<20 - 1) >> 20 << 20
	}
	return p
}

// objectStore is a tier on an S3-compatible server.
type objectStore struct {
	tier *Tier
	loc  *S3Location
	core *minio.Core
	opts S3Options

	onlineOnce sync.Once
	onlineErr  error
}

// newObjectStore connects (lazily: nothing is sent until the first
// request) to the tier's server with credentials from the AWS chain.
func newObjectStore(t *Tier, opts S3Options) (*objectStore, error) {
	u, _ := url.Parse(t.S3.Endpoint) // checked when the configuration was read
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
	}
	retries := opts.MaxRetries
	if retries <= 0 {
		retries = 3
	}
	creds := awsChain(&http.Client{Transport: transport, Timeout: 5 * time.Second})
	c, err := minio.NewCore(u.Host, &minio.Options{
		Creds: creds, Secure: u.Scheme == "https", Transport: transport,
		Region: t.S3.Region, BucketLookup: minio.BucketLookupPath, MaxRetries: retries,
	})
	if err != nil {
		return nil, fmt.Errorf("tiers: tier %s: %w", t.Name, err)
	}
	c.SetAppInfo("gguftool", "1")
	return &objectStore{tier: t, loc: t.S3, core: c, opts: opts}, nil
}

// where names an object as a person reads it.
func (s *objectStore) where(rel string) string { return s.loc.URL() + rel }

// online reports whether the bucket answers, asking once per manager;
// the error is the server's answer (refused, denied, no such bucket).
func (s *objectStore) online(ctx context.Context) error {
	s.onlineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ok, err := s.core.BucketExists(ctx, s.loc.Bucket)
		if err == nil && !ok {
			// The answer to a HEAD has no body, so a server that answers
			// an unknown key with 404 reads as "no such bucket"; a GET's
			// error says which it is.
			_, err = s.core.ListObjectsV2(s.loc.Bucket, s.loc.Prefix, "", "", "/", 1)
			if err == nil {
				return
			}
		}
		switch {
		case minio.ToErrorResponse(err).Code == minio.NoSuchBucket:
			s.onlineErr = fmt.Errorf("bucket %s does not exist at %s", s.loc.Bucket, s.loc.Endpoint)
		case err != nil:
			s.onlineErr = refusedCredentials(err)
		}
	})
	return s.onlineErr
}

// objectInfo is one listed object of the tier.
type objectInfo struct {
	rel  string
	size int64
	etag string
	mod  time.Time
}

// list lists every object under the prefix (gguftool's own records
// included), keyed by path relative to the prefix. Keys that are not
// clean relative paths (other tools' odd names) are left out: no
// artifact can be made of them.
func (s *objectStore) list(ctx context.Context, under string) ([]objectInfo, error) {
	var out []objectInfo
	for o := range s.core.Client.ListObjects(ctx, s.loc.Bucket, minio.ListObjectsOptions{Prefix: s.loc.key(under), Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("tiers: listing %s: %w", s.where(under), o.Err)
		}
		rel := strings.TrimPrefix(o.Key, s.loc.Prefix)
		if !listableKey(rel) {
			continue
		}
		out = append(out, objectInfo{rel: rel, size: o.Size, etag: strings.Trim(o.ETag, `"`), mod: o.LastModified})
	}
	return out, nil
}

// listableKey reports whether a key, relative to the prefix, can be part
// of an artifact: a clean relative path with no empty, "." or ".."
// element, and no NUL or backslash (which no file name of a tier has).
func listableKey(rel string) bool {
	return fs.ValidPath(rel) && rel != "." && !strings.ContainsAny(rel, "\x00\\")
}

// scan lists the tier's artifacts, by the same rules as a directory's.
func (s *objectStore) scan(ctx context.Context) ([]*Artifact, error) {
	objs, err := s.list(ctx, "")
	if err != nil {
		return nil, err
	}
	return Scan(newListingFS(objs), listingRoot)
}

// find returns the artifact called name.
func (s *objectStore) find(ctx context.Context, name string) (*Artifact, error) {
	all, err := s.scan(ctx)
	if err != nil {
		return nil, err
	}
	if a, ok := findIn(all, name); ok {
		return a, nil
	}
	return nil, fmt.Errorf("tiers: no artifact %q in tier %s (%s): %w", name, s.tier.Name, s.loc.URL(), ErrNoArtifact)
}

// Object metadata gguftool writes on every object it uploads.
const (
	metaDigest  = "Gguftool-Xxh3-128"
	metaJournal = "Gguftool-Journal"
)

// objectStat is what a HEAD says of one object.
type objectStat struct {
	size    int64
	etag    string
	digest  Digest // from the metadata, "" when absent
	journal string // the operation that uploaded it
}

// stamp is the object's identity and size as a Stamp.
func (o objectStat) stamp() Stamp { return Stamp{Size: o.size, ETag: o.etag} }

// stat heads one object; a missing one is fs.ErrNotExist.
func (s *objectStore) stat(ctx context.Context, rel string) (objectStat, error) {
	oi, err := s.core.Client.StatObject(ctx, s.loc.Bucket, s.loc.key(rel), minio.StatObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return objectStat{}, fmt.Errorf("tiers: %s: %w", s.where(rel), ErrNoArtifact)
		}
		return objectStat{}, fmt.Errorf("tiers: %s: %w", s.where(rel), err)
	}
	return objectStat{size: oi.Size, etag: strings.Trim(oi.ETag, `"`),
		digest: Digest(oi.UserMetadata[metaDigest]), journal: oi.UserMetadata[metaJournal]}, nil
}

// remove deletes one object; a missing one is not an error.
func (s *objectStore) remove(ctx context.Context, rel string) error {
	err := s.core.Client.RemoveObject(ctx, s.loc.Bucket, s.loc.key(rel), minio.RemoveObjectOptions{})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("tiers: removing %s: %w", s.where(rel), err)
	}
	return nil
}

func isNotFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == minio.NoSuchKey || code == "NotFound" || code == minio.NoSuchUpload
}

func isPrecondition(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.Code == minio.PreconditionFailed || r.StatusCode == http.StatusPreconditionFailed
}

// errNoObjectTier is an operation the object tiers do not offer.
var errNoObjectTier = errors.New("tiers: not available on an s3 tier")

// IsObjectURL reports whether s names an object (s3://bucket/key).
func IsObjectURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// ObjectURL resolves s3://bucket/key to the object tier whose bucket and
// prefix hold the key (the longest prefix, when several do) and the key's
// path relative to that prefix: the endpoint and credentials are the
// tier's. A URL no tier holds is a configuration error naming the object
// tiers there are.
func (c *Config) ObjectURL(u string) (*Tier, string, error) {
	rest, ok := strings.CutPrefix(u, "s3://")
	bucket, key, _ := strings.Cut(rest, "/")
	key = strings.TrimSuffix(key, "/")
	if !ok || bucket == "" || key == "" {
		return nil, "", &ConfigError{File: c.Path, Msg: fmt.Sprintf("%q is not s3://bucket/key", u)}
	}
	var best *Tier
	var where []string
	for _, t := range c.Tiers {
		if !t.IsObject() {
			continue
		}
		where = append(where, t.Name+" ("+t.S3.URL()+")")
		if t.S3.Bucket == bucket && strings.HasPrefix(key, t.S3.Prefix) && len(key) > len(t.S3.Prefix) &&
			(best == nil || len(t.S3.Prefix) > len(best.S3.Prefix)) {
			best = t
		}
	}
	if best == nil {
		if len(where) == 0 {
			where = []string{"none"}
		}
		return nil, "", &ConfigError{File: c.Path, Msg: fmt.Sprintf("no s3 tier holds %s (the s3 tiers: %s)", u, strings.Join(where, ", "))}
	}
	rel := strings.TrimPrefix(key, best.S3.Prefix)
	if err := checkRel(rel); err != nil {
		return nil, "", &ConfigError{File: c.Path, Msg: fmt.Sprintf("%s: %v", u, err)}
	}
	return best, rel, nil
}

// OpenObjectURL loads the storage-tiers configuration (flag as for
// ConfigPath) and returns a manager over it, the object tier whose bucket
// and prefix hold the s3:// URL u, and the artifact's name in that tier.
// The caller closes the manager.
func OpenObjectURL(flag, u string) (*Manager, *Tier, string, error) {
	path, err := ConfigPath(flag)
	if err != nil {
		return nil, nil, "", err
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, nil, "", err
	}
	t, name, err := cfg.ObjectURL(u)
	if err != nil {
		return nil, nil, "", err
	}
	m, err := NewManager(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	return m, t, name, nil
}
