// The runtime calls StartupHook.Initialize (a type in no namespace, by convention) before Main,
// because the tracer named this assembly among the startup hooks (src/tracer/agent_boot.h).
// Whatever happens here stays here: a startup hook that throws would end the app.
using System;

internal static class StartupHook
{
    public static void Initialize()
    {
        try
        {
            Clrmux.Agent.Agent.Start();
        }
        catch (Exception e)
        {
            try
            {
                Clrmux.Agent.Native.Log(Clrmux.Agent.Native.LogError, "the agent did not start: " + e);
            }
            catch
            {
                // nothing more to do: the app runs on without the agent
            }
        }
    }
}
