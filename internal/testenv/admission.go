package testenv

import (
	"context"
	"fmt"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AdmissionDir holds the admission policies an admin installs with the
// provider (install.md): who may write a DatabaseBinding.
func AdmissionDir() string { return filepath.Join(RepoRoot(), "cluster", "admission") }

// AdmissionPolicies reads the shipped admission policies and their
// bindings from AdmissionDir, as written.
func AdmissionPolicies() ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifests(AdmissionDir())
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no admission policy in %s", AdmissionDir())
	}
	return objs, nil
}

// InstallAdmissionPolicies applies the shipped admission policies; an
// existing one is left as it is. The kube-apiserver enforces a policy once
// its informer has seen it (well within a second here); the harness
// installs them before Crossplane core starts.
func (k *Kube) InstallAdmissionPolicies(ctx context.Context) error {
	objs, err := AdmissionPolicies()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := k.Client.Create(ctx, o.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster/admission %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// UninstallAdmissionPolicies deletes the shipped admission policies' objects.
func (k *Kube) UninstallAdmissionPolicies(ctx context.Context) error {
	objs, err := AdmissionPolicies()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := k.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
