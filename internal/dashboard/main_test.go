package dashboard_test

import (
	"testing"

	"github.com/hpsearch/hpsearch/internal/api/apitest"
)

// TestMain makes the test binary the trainer the local executor starts
// (`SELF trainer`), so the browser test's study runs real trainer
// processes.
func TestMain(m *testing.M) { apitest.Main(m) }
