package tiers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/units"
)

// Config identity (docs/format/storage-tiers.md).
const (
	ConfigSchema  = "gguftool.storage-tiers"
	ConfigVersion = 2 // version 1 (directory tiers only) is still read
	// StateDir holds a tier's journal, locks, digest cache and usage
	// record, inside the tier's root, so they travel with the disk.
	StateDir       = ".gguftool"
	maxConfigBytes = 1 << 20
)

// Role is how a tier is used.
type Role string

// Roles.
const (
	Hot  Role = "hot"
	Warm Role = "warm"
	Cold Role = "cold"
)

// Tier is a place artifacts live: a directory (Root) or a prefix of an
// S3-compatible bucket (S3).
type Tier struct {
	Name   string      `json:"name"`
	Root   string      `json:"root,omitempty"`
	S3     *S3Location `json:"s3,omitempty"`
	Role   Role        `json:"role"`
	Budget int64       `json:"-"`
	// BudgetText is the budget as written ("2TB", "500GiB", or bytes);
	// absent, null or 0: no budget, only the disk's free space limits.
	BudgetText json.RawMessage `json:"budget,omitempty"`
}

// Config is storage-tiers.json.
type Config struct {
	Schema  string  `json:"schema"`
	Version int     `json:"version"`
	Tiers   []*Tier `json:"tiers"`
	Path    string  `json:"-"`
}

// ErrConfig marks an invalid configuration (exit code 2: the user's input).
var ErrConfig = errors.New("tiers: invalid configuration")

// ConfigError says what is wrong in the configuration file.
type ConfigError struct {
	File string
	Msg  string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("tiers: %s: %s", e.File, e.Msg) }

// Is makes errors.Is(err, ErrConfig) hold.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// ConfigPath finds the configuration: the flag, else $GGUFTOOL_CONFIG,
// else $XDG_CONFIG_HOME/gguftool/storage-tiers.json (~/.config when
// XDG_CONFIG_HOME is unset).
func ConfigPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p := os.Getenv("GGUFTOOL_CONFIG"); p != "" {
		return p, nil
	}
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "gguftool", "storage-tiers.json"), nil
}

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (*Config, error) {
	f, err := filekind.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ConfigError{File: path, Msg: "no storage-tiers configuration here: pass --config, set $GGUFTOOL_CONFIG, or create it (docs/format/storage-tiers.md)"}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseConfig(data, path)
}

// ParseConfig decodes and checks a configuration: schema, version, unique
// names and roots, absolute roots that do not nest, known roles, budgets.
func ParseConfig(data []byte, name string) (*Config, error) {
	bad := func(format string, args ...any) error {
		return &ConfigError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxConfigBytes {
		return nil, bad("larger than %d bytes", maxConfigBytes)
	}
	var c Config
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return nil, bad("invalid JSON: %v", err)
	}
	if c.Schema != ConfigSchema {
		return nil, bad("schema %q is not %q", c.Schema, ConfigSchema)
	}
	if c.Version != 1 && c.Version != ConfigVersion {
		return nil, bad("version %d is not supported (this reader knows 1 and %d)", c.Version, ConfigVersion)
	}
	if len(c.Tiers) == 0 {
		return nil, bad("no tiers")
	}
	names := map[string]bool{}
	for i, t := range c.Tiers {
		if t == nil {
			return nil, bad("tier %d is null", i)
		}
		if t.Name == "" || strings.ContainsAny(t.Name, "/\\ \t\n") || names[t.Name] {
			return nil, bad("tier %d: name %q is empty, has spaces or slashes, or is repeated", i, t.Name)
		}
		names[t.Name] = true
		switch {
		case t.S3 != nil && c.Version < 2:
			return nil, bad("tier %s: an s3 tier needs version 2", t.Name)
		case t.S3 != nil && t.Root != "":
			return nil, bad("tier %s: has both a root and an s3 location: a tier is one or the other", t.Name)
		case t.S3 != nil && t.Role == Hot:
			return nil, bad("tier %s: an s3 tier cannot be hot: models are served from a local disk", t.Name)
		case t.S3 != nil:
			if err := t.S3.check(); err != nil {
				return nil, bad("tier %s: s3: %v", t.Name, err)
			}
		case !filepath.IsAbs(t.Root) || filepath.Clean(t.Root) != t.Root:
			return nil, bad("tier %s: root %q must be a clean absolute path", t.Name, t.Root)
		}
		switch t.Role {
		case Hot, Warm, Cold:
		default:
			return nil, bad("tier %s: role %q is not hot, warm or cold", t.Name, t.Role)
		}
		b, err := parseBudget(t.BudgetText)
		if err != nil {
			return nil, bad("tier %s: budget: %v", t.Name, err)
		}
		t.Budget = b
	}
	for _, a := range c.Tiers {
		for _, b := range c.Tiers {
			if a != b && a.overlaps(b) {
				return nil, bad("tiers %s (%s) and %s (%s) overlap", a.Name, a.Where(), b.Name, b.Where())
			}
		}
	}
	c.Path = name
	return &c, nil
}

// parseBudget takes a JSON number of bytes or a string with a unit (K, M,
// G, T as powers of 1000; KiB, MiB, GiB, TiB as powers of 1024).
func parseBudget(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, nil // no budget: the disk's free space is the only limit
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%d is negative", n)
		}
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s is neither a number nor a string", raw)
	}
	return units.ParseSize(s)
}

// Named returns the tier named name, or an error listing the tiers there
// are: a name the configuration lacks is the user's input (ErrConfig,
// exit code 2) like any other configuration mistake.
func (c *Config) Named(name string) (*Tier, error) {
	if t, ok := c.Tier(name); ok {
		return t, nil
	}
	names := make([]string, len(c.Tiers))
	for i, t := range c.Tiers {
		names[i] = t.Name
	}
	return nil, &ConfigError{File: c.Path, Msg: fmt.Sprintf("no tier %q (the tiers are %s)", name, strings.Join(names, ", "))}
}

// Tier returns the tier named name.
func (c *Config) Tier(name string) (*Tier, bool) {
	for _, t := range c.Tiers {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// TierOf returns the directory tier whose root holds path.
func (c *Config) TierOf(path string) (*Tier, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, false
	}
	for _, t := range c.Tiers {
		if t.S3 == nil && (abs == t.Root || strings.HasPrefix(abs, t.Root+string(filepath.Separator))) {
			return t, true
		}
	}
	return nil, false
}

// overlaps reports whether two tiers could hold the same files: roots
// that are equal or nested, or prefixes of one bucket that are.
func (t *Tier) overlaps(o *Tier) bool {
	switch {
	case t.S3 == nil && o.S3 == nil:
		return t.Root == o.Root || strings.HasPrefix(t.Root, o.Root+string(filepath.Separator))
	case t.S3 != nil && o.S3 != nil:
		return t.S3.Endpoint == o.S3.Endpoint && t.S3.Bucket == o.S3.Bucket && strings.HasPrefix(t.S3.Prefix, o.S3.Prefix)
	}
	return false
}

// Where is the tier's place as a person reads it: its root, or
// s3://bucket/prefix at the endpoint.
func (t *Tier) Where() string {
	if t.S3 != nil {
		return t.S3.URL() + " at " + t.S3.Endpoint
	}
	return t.Root
}

// IsObject reports whether the tier is a bucket prefix rather than a
// directory.
func (t *Tier) IsObject() bool { return t.S3 != nil }
