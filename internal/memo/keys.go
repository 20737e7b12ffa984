package memo

import "k8s.io/apimachinery/pkg/types"

// DataRoleKey is the key of a data role's proven login in Logins, beside
// its Database's own (keyed by the Database's UID). The Database controller
// keeps it and the DatabaseBinding controller asks it, so both must spell
// it alike.
func DataRoleKey(database types.UID, name string) types.UID {
	return types.UID(string(database) + "/data-role/" + name)
}

// PoolRef names a config's pool in the pool manager (postgres.Manager):
// kind/namespace/name. The config status controller builds the pool under
// it and the Database controller looks it up.
func PoolRef(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }
