package quant

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestIQTablesChecksum guards the generated tables against edits and
// corruption. The digests are of each C array's bytes (little-endian
// elements), taken from a C program that includes llama.cpp v0.4.0's
// ggml-common.h and writes the arrays out, not from iqtables.go.
func TestIQTablesChecksum(t *testing.T) {
	for _, c := range []struct {
		name  string
		table any
		want  string
	}{
		{"kmask_iq2xs", kmaskIQ2XS, "5ac9831b2e30eb285ef34f8501620f878432d5c04331ad1ae47f977a83ba41a5"},
		{"ksigns_iq2xs", ksignsIQ2XS, "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31"},
		{"iq2xxs_grid", iq2xxsGrid, "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54"},
		{"iq2xs_grid", iq2xsGrid, "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de"},
		{"iq2s_grid", iq2sGrid, "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88"},
		{"iq3xxs_grid", iq3xxsGrid, "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d"},
		{"iq3s_grid", iq3sGrid, "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f"},
		{"iq1s_grid", iq1sGrid, "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a"},
		{"kvalues_iq4nl", kvaluesIQ4NL, "61aa47540aa024b5d6ddaa839b84ffe59f3d5a349af5c6c7ffcb5e0474b46163"},
	} {
		b, err := binary.Append(nil, binary.LittleEndian, c.table)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != c.want {
			t.Errorf("%s: sha256 %s, want %s (regenerate iqtables.go)", c.name, got, c.want)
		}
	}
}

// TestKsignsParity checks ksigns_iq2xs against its definition, so a
// wrong expected digest above cannot hide a wrong table.
func TestKsignsParity(t *testing.T) {
	for i, s := range ksignsIQ2XS {
		n := 0
		for b := range 8 {
			n += int(s >> b & 1)
		}
		if int(s&127) != i || n%2 != 0 {
			t.Errorf("ksigns_iq2xs[%d] = %#02x", i, s)
		}
	}
}
