package tenancy

import (
	"fmt"
	"sort"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Database sizes: measured in one statement per config every
// SizeRefreshInterval, kept in memory, and copied into a Database's status
// only when it moved enough to matter.

// Largest is how many of the largest databases a config's status lists.
const Largest = 5

// SizeChangeFraction and SizeChangeBytes: a Database's status takes a new
// size when it differs from the one it shows by more than this fraction
// of it, or by more than this many bytes, whichever is larger: small
// growth does not write the status of 10,000 Databases at every refresh.
const (
	SizeChangeFraction = 0.1
	SizeChangeBytes    = 1 << 20
)

// SizeWorthWriting says whether a Database showing shown (nil: none) is to
// show measured instead.
func SizeWorthWriting(shown *v1alpha1.DatabaseSize, measured int64) bool {
	if shown == nil {
		return true
	}
	d := measured - shown.Bytes
	if d < 0 {
		d = -d
	}
	limit := max(int64(float64(shown.Bytes)*SizeChangeFraction), SizeChangeBytes)
	return d > limit
}

// SummarizeSizes is a config's sizes status: the total of the measured
// databases and the largest few, by Database name. databases maps each
// Database's name to its PostgreSQL database; sizes are by PostgreSQL
// database; a database not measured counts for nothing.
func SummarizeSizes(databases map[string]string, sizes map[string]int64) v1alpha1.ConfigSizes {
	var s v1alpha1.ConfigSizes
	all := make([]v1alpha1.NamedDatabaseSize, 0, len(databases))
	for name, db := range databases {
		b, ok := sizes[db]
		if !ok {
			continue
		}
		s.Databases++
		s.TotalBytes += b
		all = append(all, v1alpha1.NamedDatabaseSize{Name: name, Database: db, Bytes: b, Human: HumanBytes(b)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Bytes != all[j].Bytes {
			return all[i].Bytes > all[j].Bytes
		}
		return all[i].Name < all[j].Name
	})
	if len(all) > Largest {
		all = all[:Largest]
	}
	if len(all) > 0 {
		s.Largest = all
	}
	s.Total = HumanBytes(s.TotalBytes)
	return s
}

// HumanBytes writes a byte count as people read it: powers of 1024, three
// significant digits at most ("512 bytes", "7.5 MB", "12 GB", "1.2 TB").
func HumanBytes(b int64) string {
	if b < 1024 {
		return fmt.Sprintf("%d bytes", b)
	}
	v := float64(b)
	unit := ""
	for _, u := range []string{"kB", "MB", "GB", "TB", "PB"} {
		v /= 1024
		unit = u
		if v < 1024 {
			break
		}
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}
