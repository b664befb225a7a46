package ring

import (
	"errors"
	"fmt"
	"math"
)

// Bounds on a Config.
const (
	// MaxPartitions is the largest partition count.
	MaxPartitions = 1 << 16
	// MaxReplicas is the largest replica count.
	MaxReplicas = 8
	// MaxVirtualNodes is the largest number of points per member.
	MaxVirtualNodes = 1024
	// MaxLoad is the largest load bound.
	MaxLoad = 16.0
)

// Config configures how a ring places partitions. Every node of a cluster
// must use the same Config: it is part of the epoch, and nodes with
// different ones compute different rings.
type Config struct {
	// Partitions is the fixed number of partitions viewers are hashed
	// into (fcap.ViewerKey % Partitions). A prime in [2, MaxPartitions], and
	// more than the number of Active members there will ever be (Build
	// refuses more Active members than partitions). Keep it well above
	// the member count: with 271, from about 45 Active members on some
	// member may be primary of no partition. It cannot change without
	// moving every viewer. Default 271.
	Partitions int

	// Replicas is R: each partition has an owner and R-1 backups, on
	// distinct members while there are at least R Active members. In
	// [1, MaxReplicas]. Default 2.
	Replicas int

	// VirtualNodes is the number of points each member has on the hash
	// circle (consistent's ReplicationFactor). More points spread
	// partitions more evenly and make each Build slower (consistent sorts
	// every point once per member added). In [2, MaxVirtualNodes]: with a
	// single point consistent's search for a member with room can miss
	// the only member that has some. Default 128, measured by
	// BenchmarkVirtualNodes over 200 sets of five node names: adding a
	// fifth node to four moves 20.2% of the primaries on average (the
	// new node's fair share; 10 points move 22.6%, 40 move 20.5%, and
	// from 128 on it no longer falls), at most 26.6% (33.6% with 10,
	// 29.2% with 40); primaries per member stay within 1.46x of each
	// other (1.89x with 10, 1.58x with 40). A 64-member Build takes
	// 35-45ms (13-20ms with 40).
	VirtualNodes int

	// Load is consistent's load bound: no member owns more than
	// ceil(Load * floor(Partitions/members)) partitions as primary. In
	// [1, MaxLoad]. Build raises it for one ring when it leaves no room
	// for every partition (consistent would panic). Default 1.25.
	Load float64
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Partitions:   271,
		Replicas:     2,
		VirtualNodes: 128,
		Load:         1.25,
	}
}

// Validate checks every field.
func (c *Config) Validate() error {
	var errs []error
	if err := validateShape(c.Partitions, c.Replicas); err != nil {
		errs = append(errs, err)
	}
	if c.VirtualNodes < 2 || c.VirtualNodes > MaxVirtualNodes {
		errs = append(errs, fmt.Errorf("%w: VirtualNodes must be in [2, %d], got %d", ErrConfig, MaxVirtualNodes, c.VirtualNodes))
	}
	if math.IsNaN(c.Load) || c.Load < 1 || c.Load > MaxLoad {
		errs = append(errs, fmt.Errorf("%w: Load must be in [1, %v], got %v", ErrConfig, MaxLoad, c.Load))
	}
	return errors.Join(errs...)
}

// validateShape checks the partition and replica counts, which Build and
// FromTable share.
func validateShape(partitions, replicas int) error {
	var errs []error
	if partitions < 2 || partitions > MaxPartitions || !isPrime(partitions) {
		errs = append(errs, fmt.Errorf("%w: Partitions must be a prime in [2, %d], got %d", ErrConfig, MaxPartitions, partitions))
	}
	if replicas < 1 || replicas > MaxReplicas {
		errs = append(errs, fmt.Errorf("%w: Replicas must be in [1, %d], got %d", ErrConfig, MaxReplicas, replicas))
	}
	return errors.Join(errs...)
}

// isPrime reports whether n is prime, by trial division (n is at most
// MaxPartitions).
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
