package v1alpha1

// ConfigSpec returns the spec shared by both config kinds.
func (in *ClusterProviderConfig) ConfigSpec() *ProviderConfigSpec { return &in.Spec }

// ConfigStatus returns the status shared by both config kinds.
func (in *ClusterProviderConfig) ConfigStatus() *ProviderConfigStatus { return &in.Status }

// ConfigSpec returns the spec shared by both config kinds.
func (in *ProviderConfig) ConfigSpec() *ProviderConfigSpec { return &in.Spec }

// ConfigStatus returns the status shared by both config kinds.
func (in *ProviderConfig) ConfigStatus() *ProviderConfigStatus { return &in.Status }
