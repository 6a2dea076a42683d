-- Argo CD health check of an LBRegistrar (nodes.peppy-ratio.dev), for
-- argocd-cm's resource.customizations.health.nodes.peppy-ratio.dev_LBRegistrar
-- (docs/operations.md, "GitOps"). It reads the conditions lbregistrar sets:
-- Stalled (a person must act), Ready, Degraded, and Ready's reason Suspended.
hs = {status = "Progressing", message = "waiting for lbregistrar to reconcile it"}
if obj.metadata.deletionTimestamp ~= nil then
  hs.message = "being deleted"
  return hs
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local observed = obj.status.observedGeneration
if observed ~= nil and observed ~= obj.metadata.generation then
  hs.message = "lbregistrar has not seen the latest spec yet"
  return hs
end
local conditions = {}
for _, c in ipairs(obj.status.conditions) do
  conditions[c.type] = c
end
local stalled, ready, degraded = conditions["Stalled"], conditions["Ready"], conditions["Degraded"]
if stalled ~= nil and stalled.status == "True" then
  hs.status, hs.message = "Degraded", stalled.message
elseif ready ~= nil and ready.status == "False" and ready.reason == "Suspended" then
  hs.status, hs.message = "Suspended", ready.message
elseif degraded ~= nil and degraded.status == "True" then
  hs.status, hs.message = "Degraded", degraded.message
elseif ready ~= nil and ready.status == "True" then
  hs.status, hs.message = "Healthy", ready.message
elseif ready ~= nil then
  hs.message = ready.message
end
return hs
