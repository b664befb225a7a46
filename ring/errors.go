package ring

import "errors"

// Errors returned by the package. Each function wraps one of them with %w
// and a detail, so errors.Is tells a caller what kind of failure it got.
var (
	// ErrConfig is wrapped by every error of Config.Validate and
	// MembershipConfig.Validate.
	ErrConfig = errors.New("ring: invalid config")

	// ErrMember rejects a member Build or FromTable cannot place: an empty
	// or duplicate name, or an unknown state.
	ErrMember = errors.New("ring: invalid member")

	// ErrTooManyMembers rejects a membership larger than a ring can index
	// (MaxMembers), or with more Active members than partitions: such a
	// member could own nothing, so the configuration needs more
	// partitions.
	ErrTooManyMembers = errors.New("ring: too many members")

	// ErrMeta rejects node metadata that does not decode to a valid
	// member, or a member whose metadata would not fit in memberlist's
	// limit.
	ErrMeta = errors.New("ring: invalid member metadata")

	// ErrTable rejects an owners table FromTable cannot trust.
	ErrTable = errors.New("ring: invalid owners table")
)
