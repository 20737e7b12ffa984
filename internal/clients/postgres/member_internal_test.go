package postgres

import "testing"

func TestOutdatedMemberships(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name            string
		member, granted *bool
		want            bool
	}{
		{"no role", nil, nil, false},
		{"member, granted", &yes, &yes, false},
		{"not granted (a real lack)", &no, &no, false},
		{"member without the grant (a superuser admin)", &yes, &no, false},
		{"granted but denied: an outdated session", &no, &yes, true},
	}
	for _, c := range cases {
		if got := outdatedMemberships(c.member, c.granted); got != c.want {
			t.Errorf("%s: outdatedMemberships = %v, want %v", c.name, got, c.want)
		}
	}
}
