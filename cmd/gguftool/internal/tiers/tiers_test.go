package tiers

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
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

// flagCase is one argv and the options it should give, or the usage
// error it should be refused with.
type flagCase[O any] struct {
	name    string
	env     map[string]string
	args    string
	want    O
	wantErr string
}

// testFlags runs each case's argv through the command newCmd builds and
// compares the options its run function is handed, less the streams.
func testFlags[O any](t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *O) error) *cobra.Command,
	streams func(*O) **iostreams.IOStreams, cases []flagCase[O]) {
	t.Helper()
	// Let cmp see the shared options the commands embed.
	unexported := cmp.AllowUnexported(TiersStatusOptions{}, TiersRecoverOptions{}, TiersEvictOptions{}, TiersScrubOptions{},
		MigrateOptions{}, EnsureHotOptions{}, moveOptions{}, TwinsFindOptions{})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ios, _, _ := iostreams.Test()
			var got *O
			cmd := newCmd(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *O) error {
				got = o
				return nil
			})
			cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
			cmd.SetArgs(strings.Fields(tt.args))
			cmd.SetIn(&bytes.Buffer{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tt.wantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *streams(got) != ios {
				t.Error("the options do not carry the factory's streams")
			}
			*streams(got) = nil
			if diff := cmp.Diff(tt.want, *got, unexported); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewCmdTiersStatus(t *testing.T) {
	testFlags(t, NewCmdTiersStatus, func(o *TiersStatusOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[TiersStatusOptions]{
		{name: "defaults", args: ""},
		{name: "every flag", args: "--config tiers.json --json", want: TiersStatusOptions{baseOptions{Config: "tiers.json", JSON: true}}},
		{name: "an argument", args: "nvme", wantErr: `unknown command "nvme"`},
	})
}

func TestNewCmdTiersRecover(t *testing.T) {
	testFlags(t, NewCmdTiersRecover, func(o *TiersRecoverOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[TiersRecoverOptions]{
		{name: "defaults", args: ""},
		{name: "rollback", args: "--rollback --json", want: TiersRecoverOptions{baseOptions: baseOptions{JSON: true}, Rollback: true}},
		{name: "unknown flag", args: "--force", wantErr: "unknown flag: --force"},
	})
}

func TestNewCmdTiersEvict(t *testing.T) {
	testFlags(t, NewCmdTiersEvict, func(o *TiersEvictOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[TiersEvictOptions]{
		{name: "decimal size", args: "--tier nvme --free 600GB", want: TiersEvictOptions{Tier: "nvme", Free: 600e9}},
		{
			name: "binary sizes, every flag",
			args: "--tier nvme --free 1.5TiB --copy-to archive --dry-run --allow-cached-digests --bwlimit 400MB --config t.json --json",
			want: TiersEvictOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, Tier: "nvme", Free: 3 << 39, CopyTo: "archive",
				DryRun: true, AllowCache: true, BWLimit: 400e6},
		},
		{name: "no tier", args: "--free 1G", wantErr: "--tier and a positive --free are required"},
		{name: "no size", args: "--tier nvme", wantErr: "--tier and a positive --free are required"},
		{name: "bad size", args: "--tier nvme --free lots", wantErr: "invalid size"},
		{name: "an argument", args: "--tier nvme --free 1G models", wantErr: `unknown command "models"`},
	})
}

func TestNewCmdTiersScrub(t *testing.T) {
	testFlags(t, NewCmdTiersScrub, func(o *TiersScrubOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[TiersScrubOptions]{
		{name: "defaults", args: "", want: TiersScrubOptions{OlderThan: 30 * 24 * time.Hour}},
		{name: "tiers and an age in days and hours", args: "--tier archive,cold --tier warm --older-than 1d12h --json",
			want: TiersScrubOptions{baseOptions: baseOptions{JSON: true}, OlderThan: 36 * time.Hour, Tiers: []string{"archive", "cold", "warm"}}},
		{name: "everything", args: "--older-than 0", want: TiersScrubOptions{}},
		{name: "bad age", args: "--older-than 3w", wantErr: "--older-than"},
	})
}

func TestNewCmdMigrate(t *testing.T) {
	testFlags(t, NewCmdMigrate, func(o *MigrateOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[MigrateOptions]{
		{name: "defaults", args: "models/qwen3.pack --to archive", want: MigrateOptions{Artifact: "models/qwen3.pack", To: "archive"}},
		{
			name: "every flag",
			args: "m.gguf --to archive --from nvme --dry-run --allow-cached-digests --bwlimit 1GiB --config t.json --json",
			want: MigrateOptions{moveOptions: moveOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, DryRun: true, AllowCache: true,
				BWLimit: 1 << 30}, Artifact: "m.gguf", To: "archive", From: "nvme"},
		},
		{name: "bandwidth from the environment", env: map[string]string{"GGUFTOOL_BWLIMIT": "400MB"}, args: "m.pack --to cold",
			want: MigrateOptions{moveOptions: moveOptions{BWLimit: 400e6}, Artifact: "m.pack", To: "cold"}},
		{name: "the flag beats the environment", env: map[string]string{"GGUFTOOL_BWLIMIT": "400MB"}, args: "m.pack --to cold --bwlimit 0",
			want: MigrateOptions{Artifact: "m.pack", To: "cold"}},
		{name: "no destination", args: "m.pack", wantErr: "--to TIER is required"},
		{name: "no artifact", args: "--to cold", wantErr: "expected an artifact, got 0"},
		{name: "bad bandwidth", args: "m.pack --to cold --bwlimit fast", wantErr: "invalid size"},
	})
}

func TestNewCmdEnsureHot(t *testing.T) {
	testFlags(t, NewCmdEnsureHot, func(o *EnsureHotOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[EnsureHotOptions]{
		{name: "defaults", args: "models/qwen3.pack", want: EnsureHotOptions{Artifact: "models/qwen3.pack"}},
		{name: "every flag", args: "m.gguf --tier nvme --dry-run --allow-cached-digests --bwlimit 1GB --json",
			want: EnsureHotOptions{moveOptions: moveOptions{baseOptions: baseOptions{JSON: true}, DryRun: true, AllowCache: true, BWLimit: 1e9},
				Artifact: "m.gguf", Tier: "nvme"}},
		{name: "bandwidth from the environment", env: map[string]string{"GGUFTOOL_BWLIMIT": "2MiB"}, args: "m.pack",
			want: EnsureHotOptions{moveOptions: moveOptions{BWLimit: 2 << 20}, Artifact: "m.pack"}},
		{name: "two artifacts", args: "a b", wantErr: "expected an artifact, got 2"},
		{name: "no destination flag", args: "m.pack --to nvme", wantErr: "unknown flag: --to"},
	})
}

func TestNewCmdTwinsFind(t *testing.T) {
	testFlags(t, NewCmdTwinsFind, func(o *TwinsFindOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[TwinsFindOptions]{
		{name: "defaults", args: "models/qwen3.pack", want: TwinsFindOptions{Artifact: "models/qwen3.pack"}},
		{name: "verify", args: "m.gguf --verify --json --config t.json",
			want: TwinsFindOptions{baseOptions: baseOptions{Config: "t.json", JSON: true}, Artifact: "m.gguf", Verify: true}},
		{name: "no artifact", args: "--verify", wantErr: "expected an artifact, got 0"},
	})
}

func TestNewCmdTwinsVerify(t *testing.T) {
	testFlags(t, NewCmdTwinsVerify, func(o *TwinsVerifyOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[TwinsVerifyOptions]{
		{name: "defaults", args: "/nvme/m.pack /cold/m.pack", want: TwinsVerifyOptions{Hot: "/nvme/m.pack", Cold: "/cold/m.pack"}},
		{name: "json", args: "a.gguf b.gguf --json", want: TwinsVerifyOptions{Hot: "a.gguf", Cold: "b.gguf", JSON: true}},
		{name: "one path", args: "a.gguf", wantErr: "expected HOT and COLD paths, got 1"},
		{name: "no configuration flag", args: "a b --config t.json", wantErr: "unknown flag: --config"},
	})
}
