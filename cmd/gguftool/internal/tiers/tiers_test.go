package tiers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30d": 30 * 24 * time.Hour, "12h": 12 * time.Hour, "1d12h": 36 * time.Hour, "0": 0, "0.5d": 12 * time.Hour, "90s": 90 * time.Second,
	} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "3w", "1d-2h", "x"} {
		if _, err := parseAge(bad); err == nil {
			t.Errorf("parseAge(%q) accepted", bad)
		}
	}
}

// seeEmbedded lets cmp compare the unexported options the commands embed.
var seeEmbedded = cmdtest.WithCmpOptions(cmp.AllowUnexported(TiersStatusOptions{}, TiersRecoverOptions{}, TiersEvictOptions{},
	TiersScrubOptions{}, TiersForgetOptions{}, MigrateOptions{}, EnsureHotOptions{}, moveOptions{}, TwinsFindOptions{}))

func TestNewCmdTiersStatus(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTiersStatus, func(o *TiersStatusOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TiersStatusOptions]{
		{Name: "defaults", Args: ""},
		{Name: "every flag", Args: "--config tiers.json --json", Want: TiersStatusOptions{baseOptions{Config: "tiers.json", JSON: true}}},
		{Name: "an argument", Args: "nvme", WantErr: "expected no arguments, got 1"},
	}, seeEmbedded)
}

func TestNewCmdTiersRecover(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTiersRecover, func(o *TiersRecoverOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TiersRecoverOptions]{
		{Name: "defaults", Args: ""},
		{Name: "rollback", Args: "--rollback --json", Want: TiersRecoverOptions{baseOptions: baseOptions{JSON: true}, Rollback: true}},
		{Name: "unknown flag", Args: "--force", WantErr: "unknown flag: --force"},
	}, seeEmbedded)
}

func TestNewCmdTiersEvict(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTiersEvict, func(o *TiersEvictOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TiersEvictOptions]{
		{Name: "decimal size", Args: "--tier nvme --free 600GB", Want: TiersEvictOptions{Tier: "nvme", Free: 600e9}},
		{
			Name: "binary sizes, every flag",
			Args: "--tier nvme --free 1.5TiB --copy-to archive --dry-run --allow-cached-digests --bwlimit 400MB --config t.json --json",
			Want: TiersEvictOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, Tier: "nvme", Free: 3 << 39, CopyTo: "archive",
				DryRun: true, AllowCache: true, BWLimit: 400e6},
		},
		{Name: "no tier", Args: "--free 1G", WantErr: "--tier and a positive --free are required"},
		{Name: "no size", Args: "--tier nvme", WantErr: "--tier and a positive --free are required"},
		{Name: "bad size", Args: "--tier nvme --free lots", WantErr: "invalid size"},
		{Name: "an argument", Args: "--tier nvme --free 1G models", WantErr: "expected no arguments, got 1"},
	}, seeEmbedded)
}

func TestNewCmdTiersScrub(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTiersScrub, func(o *TiersScrubOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TiersScrubOptions]{
		{Name: "defaults", Args: "", Want: TiersScrubOptions{OlderThan: 30 * 24 * time.Hour}},
		{Name: "tiers and an age in days and hours", Args: "--tier archive,cold --tier warm --older-than 1d12h --json",
			Want: TiersScrubOptions{baseOptions: baseOptions{JSON: true}, OlderThan: 36 * time.Hour, Tiers: []string{"archive", "cold", "warm"}}},
		{Name: "everything", Args: "--older-than 0", Want: TiersScrubOptions{}},
		{Name: "bad age", Args: "--older-than 3w", WantErr: "--older-than"},
	}, seeEmbedded)
}

func TestNewCmdTiersForget(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTiersForget, func(o *TiersForgetOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TiersForgetOptions]{
		{Name: "a pack on a tier", Args: "models/qwen3.pack --tier archive", Want: TiersForgetOptions{Name: "models/qwen3.pack", Tier: "archive"}},
		{Name: "every flag", Args: "tiny.gguf --tier s3 --json --config t.json",
			Want: TiersForgetOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, Name: "tiny.gguf", Tier: "s3"}},
		{Name: "no tier", Args: "tiny.gguf", WantErr: "--tier is required"},
		{Name: "no name", Args: "--tier s3", WantErr: "expected the artifact's name, got 0"},
	}, seeEmbedded)
}

func TestNewCmdMigrate(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdMigrate, func(o *MigrateOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[MigrateOptions]{
		{Name: "defaults", Args: "models/qwen3.pack --to archive", Want: MigrateOptions{Artifact: "models/qwen3.pack", To: "archive"}},
		{
			Name: "every flag",
			Args: "m.gguf --to archive --from nvme --dry-run --allow-cached-digests --bwlimit 1GiB --config t.json --json",
			Want: MigrateOptions{moveOptions: moveOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, DryRun: true, AllowCache: true,
				BWLimit: 1 << 30}, Artifact: "m.gguf", To: "archive", From: "nvme"},
		},
		{Name: "bandwidth from the environment", Env: map[string]string{"GGUFTOOL_BWLIMIT": "400MB"}, Args: "m.pack --to cold",
			Want: MigrateOptions{moveOptions: moveOptions{BWLimit: 400e6}, Artifact: "m.pack", To: "cold"}},
		{Name: "the flag beats the environment", Env: map[string]string{"GGUFTOOL_BWLIMIT": "400MB"}, Args: "m.pack --to cold --bwlimit 0",
			Want: MigrateOptions{Artifact: "m.pack", To: "cold"}},
		{Name: "no destination", Args: "m.pack", WantErr: "--to TIER is required"},
		{Name: "no artifact", Args: "--to cold", WantErr: "expected an artifact, got 0"},
		{Name: "bad bandwidth", Args: "m.pack --to cold --bwlimit fast", WantErr: "invalid size"},
	}, seeEmbedded)
}

func TestNewCmdEnsureHot(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdEnsureHot, func(o *EnsureHotOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[EnsureHotOptions]{
		{Name: "defaults", Args: "models/qwen3.pack", Want: EnsureHotOptions{Artifact: "models/qwen3.pack"}},
		{Name: "every flag", Args: "m.gguf --tier nvme --dry-run --allow-cached-digests --bwlimit 1GB --wait --json",
			Want: EnsureHotOptions{moveOptions: moveOptions{baseOptions: baseOptions{JSON: true}, DryRun: true, AllowCache: true, BWLimit: 1e9},
				Artifact: "m.gguf", Tier: "nvme", Wait: true}},
		{Name: "bandwidth from the environment", Env: map[string]string{"GGUFTOOL_BWLIMIT": "2MiB"}, Args: "m.pack",
			Want: EnsureHotOptions{moveOptions: moveOptions{BWLimit: 2 << 20}, Artifact: "m.pack"}},
		{Name: "two artifacts", Args: "a b", WantErr: "expected an artifact, got 2"},
		{Name: "no destination flag", Args: "m.pack --to nvme", WantErr: "unknown flag: --to"},
	}, seeEmbedded)
}

func TestNewCmdTwinsFind(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTwinsFind, func(o *TwinsFindOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TwinsFindOptions]{
		{Name: "defaults", Args: "models/qwen3.pack", Want: TwinsFindOptions{Artifact: "models/qwen3.pack"}},
		{Name: "verify", Args: "m.gguf --verify --json --config t.json",
			Want: TwinsFindOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, Artifact: "m.gguf", Verify: true}},
		{Name: "no artifact", Args: "--verify", WantErr: "expected an artifact, got 0"},
	}, seeEmbedded)
}

func TestNewCmdTwinsVerify(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTwinsVerify, func(o *TwinsVerifyOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TwinsVerifyOptions]{
		{Name: "defaults", Args: "/nvme/m.pack /cold/m.pack", Want: TwinsVerifyOptions{Hot: "/nvme/m.pack", Cold: "/cold/m.pack"}},
		{Name: "json", Args: "a.gguf b.gguf --json", Want: TwinsVerifyOptions{Hot: "a.gguf", Cold: "b.gguf", JSON: true}},
		{Name: "one path", Args: "a.gguf", WantErr: "expected HOT and COLD paths, got 1"},
		{Name: "an s3 copy, its tier from the configuration", Args: "/nvme/m.pack s3://models/archive/m.pack --config t.json",
			Want: TwinsVerifyOptions{Hot: "/nvme/m.pack", Cold: "s3://models/archive/m.pack", Config: "t.json"}},
	}, seeEmbedded)
}
