-- Argo CD health check for a Tenant (database.ayatori.ddupan.top/v1alpha1,
-- the Configuration package's composite resource). Install it as
-- resource.customizations.health.database.ayatori.ddupan.top_Tenant in
-- argocd-cm (docs/gitops.md).
--
-- Argo CD runs it with only Lua's base and table libraries (no string
-- library), gives it the live object as the global obj and reads the
-- returned {status, message}.
--
--   Suspended    reconciliation paused (crossplane.io/paused)
--   Progressing  being deleted; not composed yet; on its way (Pending,
--                Binding, Provisioning, ExternalSecretCreated) or waiting
--                on something that resumes by itself (InstanceNotReady,
--                DatabaseNotReady, DependencyUnavailable, WaitingForTenant)
--   Degraded     Crossplane cannot compose it (Synced=False), or a refusal
--                that only a changed spec or an admin ends (AlreadyBound,
--                Released, Conflict, TenantGone, ...)
--   Healthy      Ready: the database exists, a login worked, the Secret is
--                written
-- A reason not named below is Progressing, with the reason in the message
-- and a note that this health check does not know it.

local degraded = {
  -- the binding's refusals
  AlreadyBound = true, Released = true, WrongInstance = true,
  DatabaseNotFound = true, Conflict = true, InvalidSpec = true,
  CredentialProjectionFailed = true,
  -- a binding that is not this Tenant's (NotATenantsBinding), or that
  -- released its Database because its Tenant is gone (TenantGone): an
  -- admin deletes it
  NotATenantsBinding = true, TenantGone = true,
  -- the binding was deleted while its Tenant lives: it waits for the
  -- Tenant's ExternalSecret, which goes only when the Tenant does (the
  -- Tenant's own deletion is Progressing, above)
  WaitingForExternalSecret = true,
  -- the bound Database's own problems, shown on the Tenant
  ImmutableField = true, DatabaseVanished = true, EndpointChanged = true,
  ImportDifferences = true, ProvisioningFailed = true,
  AuthenticationFailed = true, InsufficientPrivileges = true,
  UnsupportedVersion = true, DependentObjectsExist = true,
  ServerReadOnly = true, ServerRefused = true,
  DatabaseOptionsNotAllowed = true, DatabaseOptionsUnsupported = true,
  -- a data role the bound Database does not have (or has with another
  -- access): only an admin adds it there, or the team removes it
  DataRoleUnavailable = true,
  -- an extension the Tenant asks for that the Database it binds lacks:
  -- only an admin installs it there (the credential is delivered)
  ExtensionsMissing = true,
  -- the server does not serve the namespace, or the namespace holds all
  -- the databases it allows one namespace: an admin, or a deleted Tenant,
  -- ends it
  NamespaceNotAllowed = true, NamespaceLimitReached = true,
  -- the Tenant names no server, and its namespace has no default server,
  -- or more than one: an admin, or a named server, ends it
  NoDefaultServer = true, DefaultServerAmbiguous = true,
}

-- Reasons of progress, and of waits that resume by themselves.
local progressing = {
  Creating = true, Deleting = true, Reconciling = true,
  Binding = true, WaitingForTenant = true, Provisioning = true, Delivering = true,
  InstanceNotReady = true, DatabaseNotReady = true, DependencyUnavailable = true,
  BoundToTenant = true, DataRoleNotReady = true,
}

local function text(v)
  if v == nil then return "" end
  return tostring(v)
end

local function explain(reason, message)
  if text(message) == "" then return text(reason) end
  if text(reason) == "" then return text(message) end
  return text(reason) .. ": " .. text(message)
end

local function condition(status, kind)
  if status == nil or status.conditions == nil then return nil end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then return c end
  end
  return nil
end

local hs = {}
local status = obj.status
local ready = condition(status, "Ready")
local synced = condition(status, "Synced")
local annotations = obj.metadata.annotations or {}

if annotations["crossplane.io/paused"] == "true" or (synced ~= nil and synced.reason == "ReconcilePaused") then
  hs.status = "Suspended"
  hs.message = "ReconcilePaused: Crossplane does not reconcile this Tenant while it is annotated crossplane.io/paused"
  return hs
end

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Deleting: the Tenant's binding releases its Database (the Database's reclaimPolicy decides what stays)"
  return hs
end

if ready == nil and synced == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for Crossplane to compose the Tenant"
  return hs
end

if synced ~= nil and synced.status == "False" then
  hs.status = "Degraded"
  hs.message = explain(synced.reason, synced.message)
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = "Ready: database " .. text(status.database) .. " on " .. text(status.instance)
  if status.credential ~= nil and status.credential.secretRef ~= nil and status.credential.secretRef.name ~= nil then
    hs.message = hs.message .. ", Secret " .. text(status.credential.secretRef.name)
  end
  return hs
end

local reason = text(status.reason)
if degraded[reason] then
  hs.status = "Degraded"
  hs.message = explain(reason, status.message)
  return hs
end

hs.status = "Progressing"
local phase = text(status.phase)
if phase == "" then phase = "Pending" end
if reason ~= "" then
  hs.message = phase .. ": " .. explain(reason, status.message)
  if not progressing[reason] then
    hs.message = hs.message .. " (a reason this health check does not know)"
  end
elseif ready ~= nil then
  hs.message = phase .. ": " .. explain(ready.reason, ready.message)
else
  hs.message = phase
end
return hs
