-- Argo CD health check of an LBRegistrar (nodes.peppy-ratio.dev), for
-- argocd-cm's resource.customizations.health.nodes.peppy-ratio.dev_LBRegistrar
-- (docs/operations.md, "GitOps"). It gives the verdict kstatus (Flux, kpt)
-- gives, in Argo CD's words: Stalled is Degraded, Reconciling or a Ready
-- not True is Progressing, Ready True is Healthy (with Degraded's message
-- when that is True too: a warning, not a failure). spec.suspend is read
-- first, as Argo CD's own checks of suspendable kinds do.
hs = {status = "Progressing", message = "waiting for lbregistrar to reconcile it"}
if obj.metadata.deletionTimestamp ~= nil then
  hs.message = "being deleted"
  return hs
end
local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    conditions[c.type] = c
  end
end
local seen = obj.status ~= nil and obj.status.observedGeneration == obj.metadata.generation
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  local suspended = conditions["Suspended"]
  if seen and suspended ~= nil and suspended.status == "True" then
    hs.message = suspended.message
  else
    hs.message = "spec.suspend is true; lbregistrar has not seen it yet"
  end
  return hs
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.status.observedGeneration ~= nil and not seen then
  hs.message = "lbregistrar has not seen the latest spec yet"
  return hs
end
local stalled, reconciling, ready, degraded = conditions["Stalled"], conditions["Reconciling"], conditions["Ready"], conditions["Degraded"]
if stalled ~= nil and stalled.status == "True" then
  hs.status, hs.message = "Degraded", stalled.message
elseif reconciling ~= nil and reconciling.status == "True" then
  hs.message = reconciling.message
elseif ready ~= nil and ready.status ~= "True" then
  hs.message = ready.message
elseif degraded ~= nil and degraded.status == "True" then
  hs.status, hs.message = "Healthy", "Degraded: " .. degraded.message
else
  hs.status, hs.message = "Healthy", ready ~= nil and ready.message or "nothing to register yet"
end
return hs
