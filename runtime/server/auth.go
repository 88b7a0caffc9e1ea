package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ParseAPIKeys splits a list of API keys separated by commas, each
// trimmed of the white space around it ("aaa, bbb" is aaa and bbb). It
// returns nil for "" (no key: the server is open) and an error for a list
// that names no key ("," or " "), which would otherwise start a server
// that refuses everyone.
func ParseAPIKeys(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var keys []string
	for k := range strings.SplitSeq(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("API key list %q holds no key: give one or more keys separated by commas, or none at all", list)
	}
	return keys, nil
}

// apiKeys are the keys a server accepts, kept as SHA-256 digests: a
// presented key is hashed and compared with every digest in constant
// time, so neither a key's bytes nor its length can be learned from how
// long a refusal takes.
type apiKeys [][sha256.Size]byte

func newAPIKeys(keys []string) apiKeys {
	a := make(apiKeys, len(keys))
	for i, k := range keys {
		a[i] = sha256.Sum256([]byte(k))
	}
	return a
}

// authorize checks a request's "Authorization: Bearer KEY" (the scheme in
// any case, as RFC 7235 has it) and returns its admission lane: the index
// of the key it matched. Without keys every request is accepted into one
// lane "": a header the client chooses freely must not give it a lane of
// its own, which would let it jump the queue.
func (a apiKeys) authorize(r *http.Request) (lane string, ok bool) {
	if len(a) == 0 {
		return "", true
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := -1
	for i := range a {
		// Every key is compared: stopping at the match would tell which
		// one it was by the time taken.
		if subtle.ConstantTimeCompare(sum[:], a[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", false
	}
	return strconv.Itoa(match), true
}
