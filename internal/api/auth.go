package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/hpsearch/hpsearch/client"
)

// tokenPrefix starts every token NewToken makes, so a leaked one is easy
// to recognise.
const tokenPrefix = "hps_"

// hashPrefix starts every token hash.
const hashPrefix = "sha256:"

// NewToken returns a new random bearer token: 256 bits, URL-safe.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken returns the hash of a token that the server stores:
// "sha256:" and the hex SHA-256 of the token. Tokens are random and long,
// so a fast hash is enough: no dictionary reaches them.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// Tokens is the set of token hashes the server accepts.
type Tokens struct {
	hashes [][sha256.Size]byte
}

// ParseTokens reads token hashes, one a line or separated by commas
// (the form of HPSEARCH_TOKENS); blank lines and lines starting with #
// are skipped, and a hash may be followed by a space and a label. source
// names the text in errors.
func ParseTokens(source, text string) (*Tokens, error) {
	t := &Tokens{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, item := range strings.Split(line, ",") {
			hash, _, _ := strings.Cut(strings.TrimSpace(item), " ")
			if hash == "" {
				continue
			}
			h, err := parseHash(hash)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", source, i+1, err)
			}
			t.hashes = append(t.hashes, h)
		}
	}
	return t, nil
}

// Add adds the hashes of other to t.
func (t *Tokens) Add(other *Tokens) { t.hashes = append(t.hashes, other.hashes...) }

// Len counts the hashes; a nil Tokens has none.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.hashes)
}

func parseHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	hexPart, ok := strings.CutPrefix(s, hashPrefix)
	if !ok {
		return h, fmt.Errorf("%q is not a token hash: hashes look like sha256:<64 hex digits> (`hpsearch token` makes one); never store the token itself", short(s))
	}
	n, err := hex.Decode(h[:], []byte(hexPart))
	if err != nil || n != sha256.Size {
		return h, fmt.Errorf("%q is not a token hash: want sha256: and 64 hex digits", short(s))
	}
	return h, nil
}

// short cuts what might be a secret before it goes into a message.
func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "..."
	}
	return s
}

// Valid reports whether token's hash is in t. It compares with every hash
// in constant time.
func (t *Tokens) Valid(token string) bool {
	sum := sha256.Sum256([]byte(token))
	ok := 0
	for _, h := range t.hashes {
		ok |= subtle.ConstantTimeCompare(sum[:], h[:])
	}
	return ok == 1
}

// authenticate refuses a request without a valid bearer token.
func (s *Server) authenticate(r *http.Request) error {
	if s.cfg.Tokens == nil {
		return nil
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" {
		return errorf(http.StatusUnauthorized, client.CodeUnauthorized, "this request needs a bearer token: send the header Authorization: Bearer TOKEN")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errorf(http.StatusUnauthorized, client.CodeUnauthorized, "the Authorization header must be Bearer TOKEN")
	}
	if !s.cfg.Tokens.Valid(strings.TrimSpace(token)) {
		return errorf(http.StatusUnauthorized, client.CodeUnauthorized, "the bearer token is not valid: its hash is not among the server's tokens")
	}
	return nil
}
