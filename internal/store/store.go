// Package store is the contract for where studies and trials live: the
// coordinator's source of truth. Every update is a compare-and-set on the
// record's Version, so a late or duplicate result cannot count twice.
package store

import (
	"context"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Store keeps studies and trials.
//
// Get and List return copies: changing them changes nothing until they are
// passed to an Update method. Errors wrap hptype.ErrNotFound,
// hptype.ErrExists and hptype.ErrConflict.
type Store interface {
	// CreateStudy stores a new study. Its ID and Name must both be unused.
	CreateStudy(ctx context.Context, s *hptype.Study) error
	// GetStudy finds a study by ID or by name.
	GetStudy(ctx context.Context, idOrName string) (*hptype.Study, error)
	// ListStudies returns every study, oldest first.
	ListStudies(ctx context.Context) ([]*hptype.Study, error)
	// UpdateStudy replaces a study if its Version is the stored one, and
	// then increments s.Version.
	UpdateStudy(ctx context.Context, s *hptype.Study) error

	// CreateTrial stores a new trial; its number must be unused in its study.
	CreateTrial(ctx context.Context, t *hptype.Trial) error
	// GetTrial returns one trial of a study.
	GetTrial(ctx context.Context, studyID string, number int) (*hptype.Trial, error)
	// ListTrials returns a study's trials in number order.
	ListTrials(ctx context.Context, studyID string) ([]*hptype.Trial, error)
	// UpdateTrial replaces a trial if its Version is the stored one, and
	// then increments t.Version.
	UpdateTrial(ctx context.Context, t *hptype.Trial) error
}
