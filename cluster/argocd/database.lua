-- Argo CD health check for a Database (database.ayatori.ddupan.top/v1alpha1,
-- the provider's cluster-scoped managed resource). Install it as
-- resource.customizations.health.database.ayatori.ddupan.top_Database in
-- argocd-cm (docs/gitops.md).
--
-- Argo CD runs it with only Lua's base and table libraries (no string
-- library), gives it the live object as the global obj and reads the
-- returned {status, message}.
--
--   Suspended    reconciliation paused (crossplane.io/paused)
--   Degraded     Ready=False with a reason that needs a human (Conflict,
--                ImmutableField, InvalidSpec, DatabaseVanished, ...; also
--                while being deleted: a deletion the provider refuses), or
--                Synced=False while the provider names no wait
--   Progressing  not observed yet; being deleted (BoundToTenant: until its
--                Tenant releases it); provisioning, repairing, or waiting
--                on something that resumes by itself (InstanceNotReady,
--                DependencyUnavailable)
--   Healthy      Ready, whatever its binding: Available, Bound, or Released
--                (kept by reclaimPolicy Retain: not broken, and an admin
--                decides when to rebind it; the message says so)
-- A reason not named below is Progressing, with the reason in the message
-- and a note that this health check does not know it.

local degraded = {
  Conflict = true, ImmutableField = true, InvalidSpec = true,
  ImportDifferences = true, EndpointChanged = true, DatabaseVanished = true,
  ProvisioningFailed = true, AuthenticationFailed = true,
  InsufficientPrivileges = true, UnsupportedVersion = true,
  DependentObjectsExist = true, ServerReadOnly = true, ServerRefused = true,
  DatabaseOptionsNotAllowed = true, DatabaseOptionsUnsupported = true,
}

-- Reasons the provider sets while it waits for something that resumes by
-- itself: a Synced=False next to one of them is that wait, not a failure.
local waiting = {
  InstanceNotReady = true, DependencyUnavailable = true, BoundToTenant = true,
}

-- Reasons of progress (provisioning, repairing, deleting) and the waits.
local progressing = {
  Creating = true, Deleting = true, Reconciling = true,
  InstanceNotReady = true, DependencyUnavailable = true, BoundToTenant = true,
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
local spec = obj.spec or {}
local annotations = obj.metadata.annotations or {}

if annotations["crossplane.io/paused"] == "true" or (synced ~= nil and synced.reason == "ReconcilePaused") then
  hs.status = "Suspended"
  hs.message = "ReconcilePaused: the provider does not reconcile this Database while it is annotated crossplane.io/paused"
  return hs
end

if ready == nil and synced == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the provider to observe the Database"
  return hs
end

local notReady = ready ~= nil and ready.status ~= "True"
if notReady and degraded[text(ready.reason)] then
  hs.status = "Degraded"
  hs.message = explain(ready.reason, ready.message)
  return hs
end

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  if notReady and text(ready.reason) ~= "" then
    hs.message = explain(ready.reason, ready.message)
  else
    hs.message = "Deleting: the reclaimPolicy " .. text(spec.reclaimPolicy) .. " decides what is dropped"
  end
  return hs
end

if synced ~= nil and synced.status == "False" and not (notReady and waiting[text(ready.reason)]) then
  hs.status = "Degraded"
  hs.message = explain(synced.reason, synced.message)
  return hs
end

if ready == nil or notReady then
  hs.status = "Progressing"
  if ready == nil then
    hs.message = "Waiting for the provider to report Ready"
  else
    hs.message = explain(ready.reason, ready.message)
    if text(ready.reason) ~= "" and not progressing[text(ready.reason)] then
      hs.message = hs.message .. " (a reason this health check does not know)"
    end
  end
  return hs
end

hs.status = "Healthy"
local binding = status.binding or {}
local phase = text(binding.phase)
if phase == "Bound" then
  hs.message = "Available: bound to the Tenant " .. text(binding.claim)
elseif phase == "Released" then
  hs.message = "Released: its Tenant " .. text(binding.claim) .. " is gone; the database is kept, and it is bound again only after an admin clears or replaces spec.claimRef"
elseif spec.claimRef ~= nil then
  hs.message = "Available: reserved for the Tenant " .. text(spec.claimRef.namespace) .. "/" .. text(spec.claimRef.name)
else
  hs.message = "Available: not bound to any Tenant"
end
return hs
