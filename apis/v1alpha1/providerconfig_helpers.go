package v1alpha1

// ConfigSpec returns the spec of the config.
func (in *ClusterProviderConfig) ConfigSpec() *ProviderConfigSpec { return &in.Spec }

// ConfigStatus returns the status of the config.
func (in *ClusterProviderConfig) ConfigStatus() *ProviderConfigStatus { return &in.Status }
