//go:build tools

// The helm command, pinned by this module's go.mod.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
